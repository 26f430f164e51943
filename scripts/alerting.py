"""The alert rules on objectives, in every flavour the dashboards serve, for scripts/build-dashboards:

- dashboards/alerts/apihealth.rules.yml: vmalert / Prometheus rule groups (the burn-rate alerts are PromQL; the
  deadman uses MetricsQL's lag());
- dashboards/grafana/provisioning/alerting/apihealth-{influxql,flux}.yml: Grafana alerting, for the InfluxQL and
  Flux datasources the compose stack provisions;
- checks, an HTTP notification endpoint and notification rules appended to dashboards/influxdb/apihealth-template.json.

Burn-rate alerts follow the Google SRE workbook (multi-window, multi-burn-rate, a 30-day budget): page when the burn
rate is above 14.4 over 1 h and over 5 min, or above 6 over 6 h and over 30 min; ticket above 3 over 1 d and 2 h,
or above 1 over 3 d and 6 h. The burn rate of a window is its bad share over 1 - the objective; the objective comes
from the interval points themselves (objective_availability, objective_latency), so one rule set serves every
endpoint, and changing an objective needs no new rules.

Every window is recorded once per evaluation (dashboards/alerts/apihealth.recording.rules.yml, Sloth's and Pyrra's
scheme): per endpoint, env and place (ENDPOINT_KEPT: every other tag summed), the requests, failures and requests
within the latency threshold of each window and its objective; the alerts read those series, not the raw points.
Reachability needs no objective: per host, service, env and place (PLACE_TAGS: country, region), every other tag
summed, the share of requests failing with transport errors, and separately with 5xx, against the rest of the host's
traffic, or outright (several places, every place, a host with one place), from MIN_FAILING_SOURCES installs. Every
alert that divides needs MIN_REQUESTS requests in its window, a page PAGE_MIN_FAILURES failures in its short window; a
small endpoint failing steadily for hours is a ticket by its absolute count of failures. The device's own failures
and cancellations are not in count or errors (the agent counts them apart), so no rule counts them.
"""
import json

from apihealth_schema import AGENT_FIELD, FIELD, INTERVAL_FIELD, MEASUREMENT, TAG

# Every measurement, tag and field name the agent writes comes from the Swift schema (scripts/apihealth_schema.py).
INTERVAL = MEASUREMENT["requestInterval"]
AGENT = MEASUREMENT["agent"]
PARSE_FAILURE = MEASUREMENT["parseFailure"]
COUNT = INTERVAL_FIELD["count"]
ERRORS = INTERVAL_FIELD["errors"]
WITHIN_LATENCY = INTERVAL_FIELD["requestsWithinLatencyObjective"]
LATENCY_THRESHOLD = INTERVAL_FIELD["objectiveLatencyMilliseconds"]
PARSE_FAILURE_COUNT = FIELD["count"]
POINTS_RECORDED = AGENT_FIELD["pointsRecorded"]
STATUS_CLASS = TAG["statusClass"]
SERVICE, INSTANCE, HOST = TAG["service"], TAG["instance"], TAG["host"]
# Places: the global tags that say where requests were made from. Reachability compares a place with the rest of the
# host's traffic; every other global tag (app_version, instance, and any tag not named here) is summed, so an app
# fleet's versions or a service's replicas never split a place. Name your own place tags here (a datacenter, a cell).
PLACE_TAGS = [TAG["country"], "region"]
# Kept apart, never summed across: staging is not production, one service's calls are not another's.
APART_TAGS = ["env", TAG["service"]]
ENDPOINT_TAGS = [TAG[name] for name in ("host", "method", "path", "module", "service")]
# What an endpoint alert is per: the endpoint, its env and its place. Everything else is summed.
ENDPOINT_KEPT = ENDPOINT_TAGS + ["env"] + PLACE_TAGS
# What a reachability alert is per: the host, its service and env, and the place.
PLACE_KEPT = [TAG["host"]] + APART_TAGS + PLACE_TAGS
# The host's traffic from everywhere, that a place is compared with.
HOST_KEPT = [TAG["host"]] + APART_TAGS
# The global tags the InfluxQL flavour keeps (InfluxQL cannot group by "every tag but these").
INFLUXQL_GLOBAL_TAGS = PLACE_TAGS + ["env"]

# (severity, for, [(burn-rate factor, long window, short window), ...])
SEVERITIES = [
    ("page", "2m", [(14.4, "1h", "5m"), (6, "6h", "30m")]),
    ("ticket", "15m", [(3, "1d", "2h"), (1, "3d", "6h")]),
]
SECONDS = {"5m": 300, "30m": 1800, "1h": 3600, "2h": 7200, "6h": 21600, "1d": 86400, "3d": 259200, "30d": 2592000}
EVALUATION_INTERVAL = "1m"
# The agent's health point interval (APIHealthConfiguration.selfMetricsInterval) and how many may be missed.
SELF_METRICS_INTERVAL_SECONDS = 10
MISSED_HEALTH_POINTS = 3
# How far back the deadman looks: an instance silent for longer (scaled down, replaced) stops alerting.
DEADMAN_LOOKBACK = "1h"
LOSS_WINDOW = "10m"
# The agent-health rules read one process per series: a service's instances. An app install has no instance tag, and
# many installs share one series, so their running totals interleave (every drop would read as a reset) and their
# health points come every 15 minutes: those series are left out (the relay, or the app's own crash reporting, tells an
# install that stopped).
AGENT_SELECTOR = 'instance!=""'
LOSS_FIELDS = [AGENT_FIELD[name] for name in ("pointsDropped", "pointsLost", "pointsRejected", "pointsExpired")]
PARSE_FAILURE_WINDOW = "15m"
PARSE_FAILURE_SHARE = 0.01

# The minimum-traffic guard: no alert that divides (burn rates, reachability, parse failures) fires on fewer requests
# than this in its window (the long window of a burn-rate arm). At one request a minute a single failure is 1.7 % of
# an hour: a burn rate of 16.7 against 99.9 %, a page, on one request. Raise it to hear less from small endpoints, lower
# it to hear sooner; the failing-steadily ticket below still covers what it silences.
MIN_REQUESTS = 100
# A ticket for any endpoint failing steadily, whatever its traffic: at least STEADY_MIN_FAILURES failures in
# STEADY_WINDOW, more than STEADY_MIN_SHARE of its requests, and still failing in the last hour.
STEADY_WINDOW = "6h"
STEADY_MIN_FAILURES = 20
STEADY_MIN_SHARE = 0.05
# Reachability: requests from one place (every global tag: country, region, env) failing to reach a host, above
# REACHABILITY_MIN_SHARE and more than REACHABILITY_FACTOR times the host's share everywhere else, over
# REACHABILITY_WINDOW, for REACHABILITY_FOR.
REACHABILITY_WINDOW = "10m"
# As long as a burn-rate page waits, so that a place's reachability page is there to hold back (inhibit) the burn-rate
# pages of the same host and place: one outage, one notice.
REACHABILITY_FOR = "2m"
REACHABILITY_MIN_SHARE = 0.05
REACHABILITY_FACTOR = 5
# A place failing this share of its requests or more is an outage whatever the rest of the host does: several places
# down together, every place down, or a host called from one place only (no "elsewhere" to compare with).
REACHABILITY_OUTAGE_SHARE = 0.5
# Installs, not requests: a reachability alert needs failures from at least MIN_FAILING_SOURCES installs (or
# instances) within one INSTALL_INTERVAL (the app preset's aggregation interval) of its window. Each interval point is
# one install's interval, so this needs no install id: one phone retrying on bad Wi-Fi writes one failing point a
# minute however many requests fail. A service instance at the 10 s interval writes six a minute: one server that
# cannot reach a host pages, as an on-call engineer expects. The failing-steadily ticket needs MIN_FAILING_SOURCES
# failing interval points over its window.
MIN_FAILING_SOURCES = 3
INSTALL_INTERVAL = "1m"
# The page guard scaled to the objective: a page needs at least PAGE_MIN_FAILURES failed requests in its short window
# (5 min, 30 min), whatever the objective. At 99.9 % and 100 requests an hour, two failures in five minutes burn 16.7x
# over the hour: enough for the ratio, not for a person woken at 3 a.m. An endpoint failing 30 % at one request a minute
# still pages through the 6 h / 30 min arm (nine failures in 30 minutes).
PAGE_MIN_FAILURES = 5
# Late app data: an install sends its batches a minute or more after their points (the app preset: a 60 s flush
# delay, 30 s of jitter, batches up to 5 minutes old when the network is poor). Every window is summed from the raw
# points at each evaluation, so a late point is counted by every window that still covers it when it arrives; the
# fast page's 5-minute short window may not. For app installs (points without an instance), that window is also read
# ending APP_DELAY ago, and the larger of the two counts: a page waits at most APP_DELAY for late batches, and clears
# up to APP_DELAY later. A service's points (with an instance) arrive within seconds and are read as they are.
LATE_WINDOW = "5m"
APP_DELAY = "5m"
APP_SELECTOR = 'instance=""'
# Notifications: grouped by alert, host and country (one outage, one notice), in Alertmanager
# (dashboards/alerts/alertmanager.yml) and Grafana's notification policy alike.
GROUP_BY = ["alertname", "env", SERVICE, HOST, TAG["country"], "region"]
# The reachability pages are grouped per host: one place down is one notice, a host down from several places or
# everywhere is one notice listing them.
REACHABILITY_GROUP_BY = ["alertname", "env", SERVICE, HOST]
# The example webhook receiver the shipped delivery files name: change it to yours.
WEBHOOK = "http://alert-receiver:9000/apihealth"
# Flux: " from country BR" where the row has a country (a Flux string interpolation of a missing column fails).
FLUX_COUNTRY = f'${{ if exists r.{TAG["country"]} then " from country " + r.{TAG["country"]} else "" }}'
# Transport error kinds the interval points count (status_class="error" points), and how an annotation names each.
TRANSPORT_ERROR_KINDS = [(INTERVAL_FIELD["dnsErrors"], "DNS"), (INTERVAL_FIELD["connectErrors"], "connect"),
                         (INTERVAL_FIELD["tlsErrors"], "TLS"), (INTERVAL_FIELD["timeoutErrors"], "timeout")]
# Recording: (group interval, windows recorded at it), each window summed from the raw points at its resolution. The
# windows up to an hour every minute; 2 h and 6 h (the long window of the slow page, the short ones of the tickets)
# every 5 minutes; 1 d and 3 d (the tickets' long windows, which move by a fraction of a percent a minute) every 15.
# An alert reads a window's latest value, at most two of its intervals old.
RECORDED_WINDOWS = [("1m", ["5m", "30m", "1h"]), ("5m", ["2h", "6h"]), ("15m", ["1d", "3d"])]
SECONDS["10m"] = 600

OBJECTIVES = {
    "availability": {
        "name": "Availability",
        "objective": INTERVAL_FIELD["objectiveAvailability"],
        "what": "fail (a transport error or a status of 400 or more)",
    },
    "latency": {
        "name": "Latency",
        "objective": INTERVAL_FIELD["objectiveLatency"],
        "what": "take longer than the latency threshold",
    },
}


def alert_name(objective, severity):
    return f"APIHealth{OBJECTIVES[objective]['name']}Burn{severity.capitalize()}"


# ----------------------------------------------------------------------------------------------------------------
# PromQL / MetricsQL
# ----------------------------------------------------------------------------------------------------------------

def promql_sum(field, window, selector=""):
    return f"sum by ({', '.join(ENDPOINT_KEPT)}) (sum_over_time({INTERVAL}_{field}{selector}[{window}]))"


def promql_bad_share(objective, window, selector=""):
    total = promql_sum(COUNT, window, selector)
    if objective == "availability":
        return f"{promql_sum(ERRORS, window, selector)} / {total}"
    return f"(1 - {promql_sum(WITHIN_LATENCY, window, selector)} / {total})"


def promql_burn(objective, window, selector=""):
    """The burn rate of `objective` over `window`, per endpoint (and global tag)."""
    target = (f"max by ({', '.join(ENDPOINT_KEPT)}) "
              f"(last_over_time({INTERVAL}_{OBJECTIVES[objective]['objective']}{selector}[{window}]))")
    return f"({promql_bad_share(objective, window, selector)}) / (1 - {target})"


# Recorded series: apihealth_endpoint:<what>:sum<window> per endpoint and global tag (the interval points summed over
# instances and status classes), apihealth_endpoint:<objective>:last<window>, and per host
# apihealth_host:<what>:sum<REACHABILITY_WINDOW>.
RECORDED_SUMS = [("requests", COUNT), ("errors", ERRORS), ("requests_within_latency_objective", WITHIN_LATENCY)]


def recorded_name(what, window):
    aggregate = "last" if what.startswith("objective_") else "sum"
    return f"apihealth_endpoint:{what}:{aggregate}{window}"


def host_recorded_name(what):
    """A place's sum over the reachability window (per host, service, env and place)."""
    return f"apihealth_host:{what}:sum{REACHABILITY_WINDOW}"


def sources_recorded_name(what):
    """A place's failing sources (`what`: transport_errors, server_errors): the interval points with such failures
    stamped within the last INSTALL_INTERVAL, recorded at every evaluation (the alerts read the most of them over the
    reachability window). Recorded, not a subquery: a subquery's steps are aligned to whole minutes, and would see a
    point up to a minute late."""
    return f"apihealth_host:{what}_sources:count{INSTALL_INTERVAL}"


# What fails for each reachability alert: (name, field, status class of the points that hold it).
REACHABILITY_FAILURES = [("transport_errors", ERRORS, "error"), ("server_errors", COUNT, "5xx")]


def failing_points_per_interval(field, status_class, by):
    """Per `by`, the interval points with `field` above 0 stamped within one INSTALL_INTERVAL: each is one install (or
    instance) failing in that interval, whatever tags it shares with others."""
    return (f"sum by ({', '.join(by)}) (count_gt_over_time({INTERVAL}_{field}{{{STATUS_CLASS}=\"{status_class}\"}}"
            f"[{INSTALL_INTERVAL}], 0))").replace('\\"', '"')


def place_recording_rules():
    """Per host, service, env and place: requests, transport errors, 5xx and failing sources over the reachability
    window, every other global tag (app_version, instance...) summed."""
    by = ", ".join(PLACE_KEPT)
    rules = [{"record": host_recorded_name("requests"),
              "expr": f"sum by ({by}) (sum_over_time({INTERVAL}_{COUNT}[{REACHABILITY_WINDOW}]))"}]
    for what, field, status_class in REACHABILITY_FAILURES:
        rules.append({"record": host_recorded_name(what),
                      "expr": (f'sum by ({by}) (sum_over_time({INTERVAL}_{field}{{{STATUS_CLASS}="{status_class}"}}'
                               f'[{REACHABILITY_WINDOW}]))')})
        rules.append({"record": sources_recorded_name(what),
                      "expr": failing_points_per_interval(field, status_class, PLACE_KEPT)})
    return rules


def window_interval(window):
    return next(interval for interval, windows in RECORDED_WINDOWS if window in windows)


def latest(name, interval="1m"):
    """The latest value of a series recorded every `interval`: its last sample within two intervals."""
    return f"last_over_time({name}[{2 * int(interval[:-1])}m])"


def recorded(what, window):
    return latest(recorded_name(what, window), window_interval(window))


def recorded_burn(objective, window):
    """The burn rate of `objective` over `window`, per endpoint (and global tag), from the recorded series."""
    requests = recorded("requests", window)
    if objective == "availability":
        bad = f"{recorded('errors', window)} / {requests}"
    else:
        bad = f"(1 - {recorded('requests_within_latency_objective', window)} / {requests})"
    return f"({bad}) / (1 - {recorded(OBJECTIVES[objective]['objective'], window)})"


def recorded_failures(objective, window):
    """The requests that failed `objective` over `window`: errors, or requests slower than the threshold."""
    if objective == "availability":
        return recorded("errors", window)
    return f"({recorded('requests', window)} - {recorded('requests_within_latency_objective', window)})"


def late_recorded_name(what):
    return f"apihealth_endpoint:{what}:sum{LATE_WINDOW}_offset{APP_DELAY}"


def latest_of_two(now, late):
    """The larger of two per-series values, either alone where the other has none."""
    return f"(({now} >= {late}) or {late} or {now})"


def short_window(objective, window, failures=False):
    """The burn rate (or, with `failures`, the failed requests) of a page's short window; for LATE_WINDOW, the larger
    of the window ending now and the app installs' window ending APP_DELAY ago (their batches arrive late)."""
    now = recorded_failures(objective, window) if failures else recorded_burn(objective, window)
    if window != LATE_WINDOW:
        return now
    requests = latest(late_recorded_name("requests"))
    if objective == "availability":
        bad = latest(late_recorded_name("errors"))
    else:
        bad = f"({requests} - {latest(late_recorded_name('requests_within_latency_objective'))})"
    target = recorded(OBJECTIVES[objective]["objective"], "1h")
    late = bad if failures else f"({bad} / {requests}) / (1 - {target})"
    return latest_of_two(now, late)


def promql_alert(objective, severity, arms):
    def arm(factor, long, short):
        guard = (f"\n  and\n  {short_window(objective, short, failures=True)} >= {PAGE_MIN_FAILURES}"
                 if severity == "page" else "")
        return (f"(\n  {recorded_burn(objective, long)} > {factor}\n  and\n  {short_window(objective, short)} > "
                f"{factor}{guard}\n  and\n  {recorded('requests', long)} >= {MIN_REQUESTS}\n)")
    return "\nor\n".join(arm(*each) for each in arms) + "\n"


def recording_groups():
    groups = []
    for interval, windows in RECORDED_WINDOWS:
        rules = []
        for window in windows:
            for what, field in RECORDED_SUMS:
                rules.append({"record": recorded_name(what, window), "expr": promql_sum(field, window)})
            for objective in OBJECTIVES.values():
                rules.append({"record": recorded_name(objective["objective"], window),
                              "expr": (f"max by ({', '.join(ENDPOINT_KEPT)}) "
                                       f"(last_over_time({INTERVAL}_{objective['objective']}[{window}]))")})
        if interval == "1m":
            for what, field in RECORDED_SUMS:
                rules.append({"record": late_recorded_name(what),
                              "expr": (f"sum by ({', '.join(ENDPOINT_KEPT)}) (sum_over_time({INTERVAL}_{field}"
                                       f"{{{APP_SELECTOR}}}[{LATE_WINDOW}] offset {APP_DELAY}))")})
            rules += place_recording_rules()
        groups.append({"name": f"apihealth-windows-{interval}", "interval": interval, "rules": rules})
    return {"groups": groups}


# A Go template (vmalert, Prometheus) that sets $selector to the alert's labels as a series selector's filters.
SELECTOR_TEMPLATE = (
    '{{- $selector := "" -}}{{- range $name, $value := $labels -}}'
    '{{- if and (ne $name "alertname") (ne $name "severity") (ne $name "alertgroup") -}}'
    '{{- $selector = printf "%s%s=%q, " $selector $name $value -}}{{- end -}}{{- end -}}'
)


def query_template(expression, format_):
    """A template line that runs `expression` (with %[1]s where the alert's label filters go) and prints its value."""
    quoted = expression.replace('"', '\\"')
    return (f'{{{{ with printf "{quoted}" $selector | query }}}}{{{{ . | first | value | {format_} }}}}'
            f'{{{{ else }}}}unknown{{{{ end }}}}')


# Where the requests were made from, when the service tags its country or region.
WHERE_TEMPLATE_PREFIX = ("{{ with $labels.country }}from country {{ . }} {{ end }}"
                         "{{ with $labels.region }}from region {{ . }} {{ end }}")
# The place an alert per host and global tag is about, as " country=BR region=sa-east env=prod".
PLACE_TEMPLATE = "".join(f"{{{{ with $labels.{tag} }}}} {tag}={{{{ . }}}}{{{{ end }}}}" for tag in INFLUXQL_GLOBAL_TAGS)


# A Go template that sets $host_selector to the alert's host, service and env as a selector's filters: the host's
# traffic from every place.
HOST_SELECTOR_TEMPLATE = (
    '{{- $host_selector := "" -}}{{- range $name, $value := $labels -}}'
    '{{- if or ' + " ".join(f'(eq $name "{tag}")' for tag in HOST_KEPT) + ' -}}'
    '{{- $host_selector = printf "%s%s=%q, " $host_selector $name $value -}}{{- end -}}{{- end -}}'
)
# Where the requests were made from, in words: "country BR", "region eu-west", "country BR, region sa-east".
PLACE_WORDS = ('{{ if $labels.country }}country {{ $labels.country }}{{ if $labels.region }}, region '
               '{{ $labels.region }}{{ end }}{{ else }}{{ with $labels.region }}region {{ . }}{{ end }}{{ end }}'
               '{{ with $labels.env }} ({{ . }}){{ end }}')
# The anchors of the runbook sections in the shipped article (Sources/APIHealth/Docs.docc/AlertingOnObjectives.md):
# DocC makes each heading an anchor. Change RUNBOOK_BASE to where you host the documentation.
RUNBOOK_BASE = "https://apihealth.example/documentation/apihealth/alertingonobjectives"
RUNBOOKS = {
    "APIHealthReachabilityTransportErrors": "A-host-unreachable-from-a-place",
    "APIHealthReachabilityServerErrors": "A-host-failing-with-5xx-from-a-place",
    "APIHealthAvailabilityBurnPage": "A-burn-rate-page-or-ticket",
    "APIHealthAvailabilityBurnTicket": "A-burn-rate-page-or-ticket",
    "APIHealthLatencyBurnPage": "A-burn-rate-page-or-ticket",
    "APIHealthLatencyBurnTicket": "A-burn-rate-page-or-ticket",
    "APIHealthEndpointFailingSteadily": "An-endpoint-failing-steadily",
    "APIHealthAgentStoppedReporting": "An-agent-stopped-reporting-or-losing-points",
    "APIHealthAgentLosingPoints": "An-agent-stopped-reporting-or-losing-points",
    "APIHealthResponsesNotParsing": "Responses-not-parsing",
}
# The Grafana dashboard an alert links to (the VictoriaMetrics one), its host and place filled in.
# Change GRAFANA_URL to your Grafana.
GRAFANA_URL = "http://localhost:3000"
DASHBOARD_UID = "apihealth-victoriametrics"


# Where the requests were made from, in Grafana's templates.
GRAFANA_PLACE_WORDS = ('{{ if $labels.country }}country {{ $labels.country }}{{ else }}{{ with $labels.region }}region '
                       '{{ . }}{{ end }}{{ end }}{{ with $labels.env }} ({{ . }}){{ end }}')
# Grafana's alert links to the dashboard of the rule's datasource, host and country filled in.
GRAFANA_DASHBOARD_LINK = {
    language: (f"{GRAFANA_URL}/d/{uid}/apihealth?from=now-3h&to=now{{{{ with $labels.host }}}}&var-host={{{{ . }}}}"
               f"{{{{ end }}}}{{{{ with $labels.country }}}}&var-country={{{{ . }}}}{{{{ end }}}}")
    for language, uid in (("influxql", "apihealth-influxql"), ("flux", "apihealth"))
}


def runbook_url(alert):
    return f"{RUNBOOK_BASE}#{RUNBOOKS[alert]}"


def dashboard_url(variables):
    """A link to the dashboard with `variables` (dashboard variable: alert label) filled in, over the 3 hours before
    now (vmalert and Prometheus templates have no alert start time to anchor it)."""
    filled = "".join(f"{{{{ with $labels.{label} }}}}&var-{variable}={{{{ . | urlquery }}}}{{{{ end }}}}"
                     for variable, label in variables)
    return f"{GRAFANA_URL}/d/{DASHBOARD_UID}/apihealth?from=now-3h&to=now{filled}"


def reachability_rules():
    """Per host, service, env and place (country, region: PLACE_TAGS), no objective needed: a place's requests failing
    far above the rest of the host's traffic (every other place, every other global tag summed), or failing outright
    (several places down, every place down, a host called from one place), from MIN_FAILING_SOURCES installs or more,
    for transport errors and for 5xx."""
    rules = []
    requests = latest(host_recorded_name("requests"))
    on = ", ".join(HOST_KEPT)
    for alert, what, failing, summary in (
        ("APIHealthReachabilityTransportErrors", "transport_errors", "end in a transport error (no response)",
         "{{ $labels.service }} cannot reach {{ $labels.host }} from " + PLACE_WORDS
         + ": {{ $value | humanizePercentage }} of requests get no response"),
        ("APIHealthReachabilityServerErrors", "server_errors", "get a 5xx response",
         "{{ $labels.host }} answers 5xx to {{ $value | humanizePercentage }} of {{ $labels.service }}'s requests "
         "from " + PLACE_WORDS),
    ):
        failures = latest(host_recorded_name(what))
        sources = f"max_over_time({sources_recorded_name(what)}[{REACHABILITY_WINDOW}])"
        here = f"{failures} / {requests}"
        # The rest of the host's traffic: every other place of the same host, service and env; none (a host called
        # from one place) leaves only the outright test.
        elsewhere = (f"(sum by ({on}) ({failures}) - on ({on}) group_right {failures})\n      / "
                     f"((sum by ({on}) ({requests}) - on ({on}) group_right {requests}) > 0)")
        expr = (f"{here} > {REACHABILITY_MIN_SHARE}\nand\n{requests} >= {MIN_REQUESTS}\nand\n"
                f"{sources} >= {MIN_FAILING_SOURCES}\nand\n(\n  {here} >= {REACHABILITY_OUTAGE_SHARE}\n  or\n"
                f"  {here}\n    > {REACHABILITY_FACTOR} * (\n      {elsewhere}\n    )\n)\n")
        # The annotations' queries: %[1]s is the alert's labels as filters, %[2]s its host, service and env.
        def total(name, filters):
            return f"sum(last_over_time({name}{{{filters}}}[2m]))"
        failures_name, requests_name = host_recorded_name(what), host_recorded_name("requests")
        elsewhere_query = (f"({total(failures_name, '%[2]s')} - {total(failures_name, '%[1]s')}) / "
                           f"({total(requests_name, '%[2]s')} - {total(requests_name, '%[1]s')})")
        quoted = elsewhere_query.replace('"', '\\"')
        share_elsewhere = (f'{{{{ with printf "{quoted}" $selector $host_selector | query }}}}'
                           f'{{{{ . | first | value | humanizePercentage }}}}{{{{ else }}}}none (no other place)'
                           f'{{{{ end }}}}')
        whole = 'printf "%.0f"'
        counts = (f'{query_template(total(failures_name, "%[1]s"), whole)} failed of '
                  f'{query_template(total(requests_name, "%[1]s"), whole)} requests')
        places_query = (f'sort_desc(last_over_time({failures_name}{{%[2]s}}[2m]) / '
                        f'last_over_time({requests_name}{{%[2]s}}[2m]) > {REACHABILITY_MIN_SHARE})')
        places = ('{{ range printf "' + places_query.replace('"', '\\"') + '" $selector $host_selector | query }}'
                  '{{ with . | label "country" }}country {{ . }}{{ end }}{{ with . | label "region" }} region {{ . }}'
                  '{{ end }} ({{ . | value | humanizePercentage }}); {{ end }}')
        if what == "transport_errors":
            kinds = " or ".join(
                f'label_set(sum(sum_over_time({INTERVAL}_{field}{{%[1]s{STATUS_CLASS}="error"}}[{REACHABILITY_WINDOW}])), '
                f'"kind", "{name}")' for field, name in TRANSPORT_ERROR_KINDS)
            kinds_query = f"sort_desc(({kinds}) > 0)".replace('"', '\\"')
            failing_kind = (f'{{{{ with printf "{kinds_query}" $selector | query }}}}{{{{ $top := . | first }}}}'
                            f'{{{{ $top | label "kind" }}}} ({{{{ $top | value | printf "%.0f" }}}} in the last '
                            f'{REACHABILITY_WINDOW}){{{{ else }}}}unknown (the agent did not tell){{{{ end }}}}')
            kind_sentence = f" Most of them: {failing_kind}."
        else:
            failing_kind = "5xx"
            kind_sentence = ""
        templates = SELECTOR_TEMPLATE + HOST_SELECTOR_TEMPLATE
        annotations = {"summary": summary}
        annotations["description"] = (
            templates
            + f"Requests from {{{{ $labels.service }}}} to https://{{{{ $labels.host }}}} made from {PLACE_WORDS} "
              f"{failing}: {{{{ $value | humanizePercentage }}}} of them ({counts}) over the last "
              f"{REACHABILITY_WINDOW}, against {share_elsewhere} of the host's requests from everywhere else, "
              f"from at least {MIN_FAILING_SOURCES} installs or instances.{kind_sentence} Failing from this host: "
              f"{places}No objective is needed for this alert; it waits for {MIN_REQUESTS} requests in the window. A "
              f"place that cannot reach a host others reach points at what that place is served: a DNS answer, a "
              f"route, a firewall, a CDN edge, a certificate; every place failing points at the host itself. Check the "
              f"host from there, and the upstream's status page."
        )
        annotations["share_here"] = "{{ $value | humanizePercentage }}"
        annotations["share_elsewhere"] = templates + share_elsewhere
        annotations["counts"] = templates + counts
        annotations["failing_kind"] = templates + failing_kind if what == "transport_errors" else failing_kind
        annotations["places_failing"] = templates + places
        annotations["runbook_url"] = runbook_url(alert)
        annotations["dashboard"] = dashboard_url([("host", "host"), ("country", "country"), ("env", "env")])
        rules.append({"alert": alert, "expr": expr, "for": REACHABILITY_FOR, "labels": {"severity": "page"},
                      "annotations": annotations})
    return rules


def steady_failure_rule():
    errors, requests = recorded("errors", STEADY_WINDOW), recorded("requests", STEADY_WINDOW)
    return {
        "alert": "APIHealthEndpointFailingSteadily",
        "expr": (f"{errors} / {requests} > {STEADY_MIN_SHARE}\nand\n{errors} >= {STEADY_MIN_FAILURES}\nand\n"
                 f"{recorded('errors', '1h')} > 0\nand\n"
                 f"sum by ({', '.join(ENDPOINT_KEPT)}) (count_gt_over_time({INTERVAL}_{ERRORS}[{STEADY_WINDOW}], 0))"
                 f" >= {MIN_FAILING_SOURCES}\n"),
        "for": "15m",
        "labels": {"severity": "ticket"},
        "annotations": {
            "summary": ("{{ $labels.method }} {{ $labels.host }}{{ $labels.path }} has been failing for hours: "
                        f"{{{{ $value | humanizePercentage }}}} of its requests over {STEADY_WINDOW} "
                        "({{ $labels.service }})"),
            "description": (
                "Requests from {{ $labels.service }} (module {{ $labels.module }}) to {{ $labels.method }} "
                f"https://{{{{ $labels.host }}}}{{{{ $labels.path }}}} {WHERE_TEMPLATE_PREFIX}fail steadily: "
                f"{{{{ $value | humanizePercentage }}}} of them over the last {STEADY_WINDOW}, at least "
                f"{STEADY_MIN_FAILURES} failures in at least {MIN_FAILING_SOURCES} interval points (installs or "
                f"intervals), and some in the last hour. Ticket: the endpoint may be too small "
                f"for the ratio alerts (they need {MIN_REQUESTS} requests in a window), or fail below what pages; "
                "either way it has not worked for hours. No objective is needed for this alert."
            ),
        },
    }


def vmalert_annotations(objective, severity, arms):
    selector = "{%[1]s}"
    budget_left = f"1 - {promql_burn(objective, '30d', selector)}"
    target = f"max({INTERVAL}_{OBJECTIVES[objective]['objective']}{selector})"
    threshold = f"max({INTERVAL}_{LATENCY_THRESHOLD}{selector})"
    windows = " or ".join(f"{long} (confirmed over {short}) above {factor}" for factor, long, short in arms)
    milliseconds = query_template(threshold, 'printf "%.0f"')
    latency = f" within {milliseconds} ms" if objective == "latency" else ""
    what = OBJECTIVES[objective]["what"]
    urgency = ("Page: at this rate the month's budget is gone within days."
               if severity == "page" else "Ticket: not urgent tonight, but the month's budget will not last.")
    return {
        "summary": (f"{{{{ $labels.method }}}} {{{{ $labels.host }}}}{{{{ $labels.path }}}} burns its "
                    f"{objective} budget {{{{ printf \"%.1f\" $value }}}}x too fast ({{{{ $labels.service }}}})"),
        "description": (
            SELECTOR_TEMPLATE
            + f"{urgency} Requests from {{{{ $labels.service }}}} (module {{{{ $labels.module }}}}) to "
              f"{{{{ $labels.method }}}} https://{{{{ $labels.host }}}}{{{{ $labels.path }}}} "
              f"{WHERE_TEMPLATE_PREFIX}{what} {{{{ printf \"%.1f\" $value }}}} times as often as the {objective} "
              f"objective allows (objective: {query_template(target, 'humanizePercentage')} of requests"
              f"{latency}). Burn rate over {windows}; a burn rate of 1 spends the 30-day error budget in exactly 30 "
              f"days. Error budget left over the last 30 days: {query_template(budget_left, 'humanizePercentage')}. "
              f"Check the endpoint on the APIHealth dashboards (SLO section; error ratio and status classes, or "
              f"latency) and the upstream's status page."
        ),
        "objective": objective,
        "burn_rate": '{{ printf "%.2f" $value }}',
    }


def vmalert_rules():
    objectives = []
    for objective in OBJECTIVES:
        for severity, duration, arms in SEVERITIES:
            objectives.append({
                "alert": alert_name(objective, severity),
                "expr": promql_alert(objective, severity, arms),
                "for": duration,
                "labels": {"severity": severity},
                "annotations": vmalert_annotations(objective, severity, arms),
            })
    silence = SELF_METRICS_INTERVAL_SECONDS * MISSED_HEALTH_POINTS
    loss = " + ".join(f"increase({AGENT}_{field}{{{AGENT_SELECTOR}}}[{LOSS_WINDOW}])" for field in LOSS_FIELDS)
    agents = [
        {
            "alert": "APIHealthAgentStoppedReporting",
            "expr": f"lag({AGENT}_{POINTS_RECORDED}{{{AGENT_SELECTOR}}}[{DEADMAN_LOOKBACK}]) > {silence}\n",
            "labels": {"severity": "ticket"},
            "annotations": {
                "summary": "APIHealth in {{ $labels.service }} {{ $labels.instance }} stopped reporting",
                "description": (
                    "The APIHealth agent of {{ $labels.service }} (instance {{ $labels.instance }}) has sent no "
                    "health point for {{ $value | humanizeDuration }} (it sends one every "
                    f"{SELF_METRICS_INTERVAL_SECONDS} s). Either the process stopped (a crash, or a scale-down or "
                    f"deploy: then this clears after {DEADMAN_LOOKBACK}), or it cannot reach the metrics server. "
                    "Until it reports again, what it calls is not measured and no objective alert can fire for it."
                ),
            },
        },
        {
            "alert": "APIHealthAgentLosingPoints",
            "expr": f"{loss} > 0\n",
            "labels": {"severity": "ticket"},
            "annotations": {
                "summary": "APIHealth in {{ $labels.service }} {{ $labels.instance }} is losing points",
                "description": (
                    "The APIHealth agent of {{ $labels.service }} (instance {{ $labels.instance }}) lost "
                    f"{{{{ $value }}}} points in the last {LOSS_WINDOW} (dropped past its pending cap, lost by "
                    "the spool, rejected by the server, or expired after retrying). The dashboards and alerts "
                    "undercount while this lasts. Its last_error field and log say why: a server refusing writes "
                    "(a token, a bucket), a full disk, or more points than it may keep."
                ),
            },
        },
        {
            "alert": "APIHealthResponsesNotParsing",
            "expr": (f"sum by ({', '.join(ENDPOINT_KEPT)}) (sum_over_time({PARSE_FAILURE}_{PARSE_FAILURE_COUNT}"
                     f"[{PARSE_FAILURE_WINDOW}]))\n/\n{promql_sum(COUNT, PARSE_FAILURE_WINDOW)}\n"
                     f"> {PARSE_FAILURE_SHARE}\nand\n{promql_sum(COUNT, PARSE_FAILURE_WINDOW)} >= {MIN_REQUESTS}\n"),
            "for": "5m",
            "labels": {"severity": "page"},
            "annotations": {
                "summary": ("Responses of {{ $labels.method }} {{ $labels.host }}{{ $labels.path }} stopped "
                            "parsing ({{ $labels.service }})"),
                "description": (
                    "{{ $value | humanizePercentage }} of the responses {{ $labels.service }} (module "
                    "{{ $labels.module }}) got from {{ $labels.method }} https://{{ $labels.host }}{{ $labels.path }} "
                    f"in the last {PARSE_FAILURE_WINDOW} could not be decoded (more than "
                    f"{PARSE_FAILURE_SHARE:.0%}): the requests succeed but the app cannot read what comes back. "
                    "Often the upstream changed its format, or answers with an error page and a 200. The "
                    "apihealth_parse_failure points carry the coding path and the status."
                ),
            },
        },
    ]
    objectives.append(steady_failure_rule())
    for rule in objectives + agents:
        rule["annotations"]["runbook_url"] = runbook_url(rule["alert"])
        rule["annotations"]["dashboard"] = dashboard_url(
            [("host", "host"), ("country", "country"), ("env", "env"), ("instance", "instance")])
    return {"groups": [
        {"name": "apihealth-objectives", "interval": EVALUATION_INTERVAL, "rules": objectives},
        {"name": "apihealth-reachability", "interval": EVALUATION_INTERVAL, "rules": reachability_rules()},
        {"name": "apihealth-agents", "interval": EVALUATION_INTERVAL, "rules": agents},
    ]}


# ----------------------------------------------------------------------------------------------------------------
# YAML (the rule files are plain enough to write without a YAML library, which the machine may not have)
# ----------------------------------------------------------------------------------------------------------------

def yaml_scalar(value, indent):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    text = str(value)
    if "\n" in text:
        pad = " " * indent
        return "|\n" + "\n".join(pad + line if line else "" for line in text.rstrip("\n").split("\n"))
    return json.dumps(text)


def yaml(value, indent=0):
    pad = " " * indent
    lines = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:")
                lines.append(yaml(item, indent + 2))
            elif isinstance(item, (dict, list)):
                lines.append(f"{pad}{key}: {'{}' if isinstance(item, dict) else '[]'}")
            else:
                lines.append(f"{pad}{key}: {yaml_scalar(item, indent + 2)}")
    else:
        for item in value:
            if isinstance(item, dict) and item:
                inner = yaml(item, indent + 2).split("\n")
                lines.append(f"{pad}- {inner[0].lstrip()}")
                lines.extend(inner[1:])
            elif isinstance(item, list):
                lines.append(f"{pad}- {json.dumps(item)}")
            else:
                lines.append(f"{pad}- {yaml_scalar(item, indent + 2)}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------
# InfluxQL and Flux: the same burn rates, for Grafana alerting and InfluxDB checks
# ----------------------------------------------------------------------------------------------------------------

def influxql_burn(objective, guarded=False):
    """The burn rate of `objective` over Grafana's time range ($timeFilter), per endpoint and global tag; `guarded`:
    only where the range holds MIN_REQUESTS requests (a subquery: InfluxQL has no HAVING)."""
    if objective == "availability":
        bad = f'sum("{ERRORS}") / sum("{COUNT}")'
    else:
        bad = f'(1 - sum("{WITHIN_LATENCY}") / sum("{COUNT}"))'
    group = ", ".join(f'"{tag}"' for tag in ENDPOINT_TAGS + INFLUXQL_GLOBAL_TAGS)
    requests = f', sum("{COUNT}") AS "requests"' if guarded else ""
    burn = (f'SELECT {bad} / (1 - max("{OBJECTIVES[objective]["objective"]}")) AS "burn_rate"{requests} '
            f'FROM "{INTERVAL}" WHERE $timeFilter GROUP BY {group}')
    if not guarded:
        return burn
    return f'SELECT "burn_rate" FROM ({burn}) WHERE "requests" >= {MIN_REQUESTS} GROUP BY {group}'



# Per instance seen in the time range: its health points per interval (fill(0) makes the empty ones), averaged over
# the last MISSED_HEALTH_POINTS + 1 intervals (the last may be still filling). 0 when the agent went silent.
INFLUXQL_AGENT_SILENCE = (f'SELECT moving_average("points", {MISSED_HEALTH_POINTS + 1}) AS "points" FROM '
                          f'(SELECT count("{POINTS_RECORDED}") AS "points" FROM "{AGENT}" WHERE $timeFilter GROUP BY '
                          f'time({SELF_METRICS_INTERVAL_SECONDS}s), "{SERVICE}", "{INSTANCE}" fill(0)) '
                          f'GROUP BY "{SERVICE}", "{INSTANCE}"')
INFLUXQL_AGENT_LOSS = ("SELECT " + " + ".join(f'spread("{field}")' for field in LOSS_FIELDS)
                       + f' AS "points_lost" FROM "{AGENT}" WHERE $timeFilter GROUP BY "{SERVICE}", "{INSTANCE}"')


def flux_burn(objective, bucket="apihealth", guarded=False):
    """The burn rate of `objective` over the query's range, per endpoint, env and place (ENDPOINT_KEPT);
    `guarded`: only where the range holds MIN_REQUESTS requests."""
    good_or_bad = ERRORS if objective == "availability" else WITHIN_LATENCY
    target = OBJECTIVES[objective]["objective"]
    share = (f"r.{ERRORS} / r.{COUNT}" if objective == "availability"
             else f"1.0 - r.{WITHIN_LATENCY} / r.{COUNT}")
    return f"""data = from(bucket: "{bucket}")
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "{INTERVAL}" and (r._field == "{COUNT}" or r._field == "{good_or_bad}" or r._field == "{target}"))
    |> group(columns: {json.dumps(ENDPOINT_KEPT + ["_measurement", "_field"])})

counts = data
    |> filter(fn: (r) => r._field == "{COUNT}" or r._field == "{good_or_bad}")
    |> sum()
    |> map(fn: (r) => ({{r with _value: float(v: r._value)}}))

objective = data
    |> filter(fn: (r) => r._field == "{target}")
    |> max()
    |> drop(columns: ["_time", "_start", "_stop"])

union(tables: [counts |> drop(columns: ["_start", "_stop"]), objective])
    |> group(columns: ["_field", "_value"], mode: "except")
    |> pivot(rowKey: ["_measurement"], columnKey: ["_field"], valueColumn: "_value")
    |> filter(fn: (r) => exists r.{target} and r.{COUNT} > {f"{float(MIN_REQUESTS) - 0.5}" if guarded else "0.0"})
    |> map(fn: (r) => ({{r with _value: ({share}) / (1.0 - r.{target}), _time: now()}}))
    |> drop(columns: ["{COUNT}", "{good_or_bad}", "{target}", "_measurement"])
"""


def flux_agent_silence(bucket="apihealth"):
    return f"""from(bucket: "{bucket}")
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "{AGENT}" and r._field == "{POINTS_RECORDED}")
    |> group(columns: ["{SERVICE}", "{INSTANCE}"])
    |> last()
    |> map(fn: (r) => ({{_time: r._time, {SERVICE}: r.{SERVICE}, {INSTANCE}: r.{INSTANCE}, _value: float(v: int(v: now()) - int(v: r._time)) / 1000000000.0}}))
"""


def flux_agent_loss(bucket="apihealth"):
    fields = " or ".join(f'r._field == "{field}"' for field in LOSS_FIELDS)
    return f"""from(bucket: "{bucket}")
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "{AGENT}" and ({fields}))
    |> group(columns: ["{SERVICE}", "{INSTANCE}", "_field"])
    |> spread()
    |> group(columns: ["{SERVICE}", "{INSTANCE}"])
    |> sum()
    |> map(fn: (r) => ({{r with _value: float(v: r._value)}}))
"""


# ----------------------------------------------------------------------------------------------------------------
# Grafana alerting provisioning
# ----------------------------------------------------------------------------------------------------------------

def grafana_query(ref, datasource, language, query, seconds):
    model = {"refId": ref, "datasource": {"type": "influxdb", "uid": datasource}, "intervalMs": 60000,
             "maxDataPoints": 43200}
    if language == "influxql":
        model.update({"rawQuery": True, "resultFormat": "time_series", "query": query})
    else:
        model["query"] = query
    return {"refId": ref, "relativeTimeRange": {"from": seconds, "to": 0}, "datasourceUid": datasource,
            "model": model}


def grafana_expression(ref, kind, **fields):
    model = {"refId": ref, "type": kind, "datasource": {"type": "__expr__", "uid": "__expr__"}, **fields}
    return {"refId": ref, "datasourceUid": "__expr__", "model": model}


def grafana_reduce(ref, source):
    return grafana_expression(ref, "reduce", expression=source, reducer="last", settings={"mode": "dropNN"})


def reachability_query(language, what, by_host):
    """Grafana's query of one reachability sum over its time range: the place's or the host's failures (`what`:
    transport_errors, server_errors) or requests, per host, service, env and place (every other tag summed)."""
    field, status_class = {"requests": (COUNT, None), "transport_errors": (ERRORS, "error"),
                           "server_errors": (COUNT, "5xx")}[what]
    if language == "influxql":
        tags = HOST_KEPT if by_host else [HOST, SERVICE] + INFLUXQL_GLOBAL_TAGS
        where = f""""{STATUS_CLASS}" = '{status_class}' AND """ if status_class else ""
        return (f'SELECT sum("{field}") AS "{what}" FROM "{INTERVAL}" WHERE {where}$timeFilter '
                f'GROUP BY {", ".join(f"{chr(34)}{tag}{chr(34)}" for tag in tags)}')
    status = f' and r.{STATUS_CLASS} == "{status_class}"' if status_class else ""
    group = f'group(columns: {json.dumps(HOST_KEPT if by_host else PLACE_KEPT)})'
    return f"""// Reachability: {what} {"per host" if by_host else "per host and place"}
from(bucket: "apihealth")
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "{INTERVAL}" and r._field == "{field}"{status})
    |> {group}
    |> sum()
    |> map(fn: (r) => ({{r with _value: float(v: r._value)}}))
"""


def sources_query(language, what):
    """Grafana's query of a place's failing sources over its time range: the most interval points with failures
    (`what`) in one INSTALL_INTERVAL. InfluxDB keeps one point per series and timestamp: installs that share every tag
    and stamp the same second count once."""
    field, status_class = {"transport_errors": (ERRORS, "error"), "server_errors": (COUNT, "5xx")}[what]
    if language == "influxql":
        tags = ", ".join(f'"{tag}"' for tag in [HOST, SERVICE] + INFLUXQL_GLOBAL_TAGS)
        return (f'SELECT max("points") AS "{what}_sources" FROM (SELECT count("{field}") AS "points" FROM "{INTERVAL}" '
                f"""WHERE "{STATUS_CLASS}" = '{status_class}' AND "{field}" > 0 AND $timeFilter """
                f'GROUP BY time({INSTALL_INTERVAL}), {tags}) GROUP BY {tags}')
    return f"""// Reachability: {what} sources per host and place
from(bucket: "apihealth")
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "{INTERVAL}" and r._field == "{field}" and r.{STATUS_CLASS} == "{status_class}" and r._value > 0)
    |> group(columns: {json.dumps(PLACE_KEPT)})
    |> aggregateWindow(every: {INSTALL_INTERVAL}, fn: count, createEmpty: false)
    |> max()
    |> map(fn: (r) => ({{r with _value: float(v: r._value)}}))
"""


def grafana_reachability_rules(language, datasource):
    """The reachability alerts in Grafana: four sums over the window (the place's failures and requests, the host's)
    and the place's failing sources, reduced, compared in a math expression that joins a place to its host."""
    rules = []
    flavour = "InfluxQL" if language == "influxql" else "Flux"
    for alert, what, failing in (("APIHealthReachabilityTransportErrors", "transport_errors", "end in a transport error"),
                                 ("APIHealthReachabilityServerErrors", "server_errors", "get a 5xx response")):
        data = []
        for ref, reduced, name, by_host in (("A", "E", what, False), ("B", "F", "requests", False),
                                            ("C", "G", what, True), ("D", "H", "requests", True)):
            data.append(grafana_query(ref, datasource, language, reachability_query(language, name, by_host),
                                      SECONDS[REACHABILITY_WINDOW]))
            data.append(grafana_reduce(reduced, ref))
        data.append(grafana_query("L", datasource, language, sources_query(language, what),
                                  SECONDS[REACHABILITY_WINDOW]))
        data.append(grafana_reduce("M", "L"))
        data.append(grafana_expression("I", "math", expression="$E / $F"))
        # The rest of the host: none (NaN) for a host called from one place, where only the outright test holds.
        data.append(grafana_expression("J", "math", expression="($G - $E) / ($H - $F)"))
        data.append(grafana_expression(
            "K", "math", expression=(f"$I > {REACHABILITY_MIN_SHARE} && $F >= {MIN_REQUESTS} && "
                                     f"$M >= {MIN_FAILING_SOURCES} && ($I >= {REACHABILITY_OUTAGE_SHARE} || "
                                     f"$I > {REACHABILITY_FACTOR} * $J)")))
        rules.append({
            "uid": f"apihealth-{language}-{what.replace('_', '-')}-reachability",
            "title": f"{alert} ({flavour})",
            "condition": "K",
            "data": data,
            "noDataState": "OK",
            "execErrState": "Error",
            "for": REACHABILITY_FOR,
            "labels": {"severity": "page"},
            "annotations": {
                "summary": (f"{{{{ $labels.service }}}}: {{{{ $labels.host }}}} from {GRAFANA_PLACE_WORDS}: "
                            f"{{{{ humanizePercentage $values.I.Value }}}} of requests {failing}"),
                "description": (
                    f"Requests from {{{{ $labels.service }}}} to https://{{{{ $labels.host }}}} made from "
                    f"{GRAFANA_PLACE_WORDS} {failing}: {{{{ humanizePercentage $values.I.Value }}}} of them "
                    f"({{{{ $values.E.Value }}}} of {{{{ $values.F.Value }}}} requests, from {{{{ $values.M.Value }}}} "
                    f"installs or instances at once) over the last {REACHABILITY_WINDOW}, against "
                    f"{{{{ humanizePercentage $values.J.Value }}}} of the host's requests from everywhere else (NaN: "
                    f"no other place). It waits for {MIN_REQUESTS} requests and {MIN_FAILING_SOURCES} failing "
                    f"installs. No objective is needed for this alert."
                ),
                "runbook_url": runbook_url(alert),
                "dashboard": GRAFANA_DASHBOARD_LINK[language],
            },
        })
    return rules


def endpoint_sum_query(language, field, alias):
    """Grafana's query of one field's sum over its time range, per endpoint and global tag."""
    if language == "influxql":
        group = ", ".join(f'"{tag}"' for tag in ENDPOINT_TAGS + INFLUXQL_GLOBAL_TAGS)
        return f'SELECT sum("{field}") AS "{alias}" FROM "{INTERVAL}" WHERE $timeFilter GROUP BY {group}'
    return f"""// Failing steadily: {alias}
from(bucket: "apihealth")
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "{INTERVAL}" and r._field == "{field}")
    |> group(columns: {json.dumps(ENDPOINT_KEPT)})
    |> sum()
    |> map(fn: (r) => ({{r with _value: float(v: r._value)}}))
"""


def failing_points_query(language):
    """Grafana's query of the interval points with failures over its time range, per endpoint and global tag."""
    if language == "influxql":
        group = ", ".join(f'"{tag}"' for tag in ENDPOINT_TAGS + INFLUXQL_GLOBAL_TAGS)
        return (f'SELECT count("{ERRORS}") AS "failing_points" FROM "{INTERVAL}" WHERE "{ERRORS}" > 0 AND $timeFilter '
                f'GROUP BY {group}')
    return f"""// Failing steadily: failing_points
from(bucket: "apihealth")
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "{INTERVAL}" and r._field == "{ERRORS}" and r._value > 0)
    |> group(columns: {json.dumps(ENDPOINT_KEPT)})
    |> count()
    |> map(fn: (r) => ({{r with _value: float(v: r._value)}}))
"""


def grafana_steady_failure_rule(language, datasource):
    """APIHealthEndpointFailingSteadily in Grafana: failures and requests over STEADY_WINDOW, failures over the last
    hour."""
    data = []
    for ref, reduced, field, alias, window in (("A", "D", ERRORS, "failures", STEADY_WINDOW),
                                               ("B", "E", COUNT, "requests", STEADY_WINDOW),
                                               ("C", "F", ERRORS, "failures_last_hour", "1h")):
        data.append(grafana_query(ref, datasource, language, endpoint_sum_query(language, field, alias),
                                  SECONDS[window]))
        data.append(grafana_reduce(reduced, ref))
    data.append(grafana_query("I", datasource, language, failing_points_query(language), SECONDS[STEADY_WINDOW]))
    data.append(grafana_reduce("J", "I"))
    data.append(grafana_expression("G", "math", expression="$D / $E"))
    data.append(grafana_expression(
        "H", "math", expression=(f"$G > {STEADY_MIN_SHARE} && $D >= {STEADY_MIN_FAILURES} && $F > 0 && "
                                 f"$J >= {MIN_FAILING_SOURCES}")))
    flavour = "InfluxQL" if language == "influxql" else "Flux"
    return {
        "uid": f"apihealth-{language}-failing-steadily",
        "title": f"APIHealthEndpointFailingSteadily ({flavour})",
        "condition": "H",
        "data": data,
        "noDataState": "OK",
        "execErrState": "Error",
        "for": "15m",
        "labels": {"severity": "ticket"},
        "annotations": {
            "summary": ("{{ $labels.method }} {{ $labels.host }}{{ $labels.path }} has been failing for hours: "
                        f"{{{{ humanizePercentage $values.G.Value }}}} of its requests over {STEADY_WINDOW}"),
            "description": (
                "Requests from {{ $labels.service }} (module {{ $labels.module }}) to {{ $labels.method }} "
                f"https://{{{{ $labels.host }}}}{{{{ $labels.path }}}}{PLACE_TEMPLATE} fail steadily: "
                f"{{{{ $values.D.Value }}}} failures of {{{{ $values.E.Value }}}} requests over {STEADY_WINDOW}, "
                f"{{{{ $values.F.Value }}}} in the last hour, in {{{{ $values.J.Value }}}} interval points. No "
                "objective is needed for this alert."
            ),
        },
    }


def grafana_failures_query(language, objective):
    """Grafana's query of the requests that failed `objective` over its time range, per endpoint, env and place."""
    if language == "influxql":
        group = ", ".join(f'"{tag}"' for tag in ENDPOINT_TAGS + INFLUXQL_GLOBAL_TAGS)
        failed = (f'sum("{ERRORS}")' if objective == "availability"
                  else f'sum("{COUNT}") - sum("{WITHIN_LATENCY}")')
        return f'SELECT {failed} AS "failures" FROM "{INTERVAL}" WHERE $timeFilter GROUP BY {group}'
    group = f'group(columns: {json.dumps(ENDPOINT_KEPT + ["_measurement", "_field"])})'
    if objective == "availability":
        return f"""from(bucket: "apihealth")
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "{INTERVAL}" and r._field == "{ERRORS}")
    |> {group}
    |> sum()
    |> map(fn: (r) => ({{r with _value: float(v: r._value)}}))
"""
    return f"""from(bucket: "apihealth")
    |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
    |> filter(fn: (r) => r._measurement == "{INTERVAL}" and (r._field == "{COUNT}" or r._field == "{WITHIN_LATENCY}"))
    |> {group}
    |> sum()
    |> pivot(rowKey: ["_measurement"], columnKey: ["_field"], valueColumn: "_value")
    |> filter(fn: (r) => exists r.{WITHIN_LATENCY})
    |> map(fn: (r) => ({{r with _value: float(v: r.{COUNT} - r.{WITHIN_LATENCY})}}))
    |> drop(columns: ["{COUNT}", "{WITHIN_LATENCY}", "_measurement"])
"""


def grafana_rules(language, datasource):
    rules = []
    letters = iter("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    for objective in OBJECTIVES:
        for severity, duration, arms in SEVERITIES:
            data, conditions, letters = [], [], iter("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
            for factor, long, short in arms:
                pair = []
                for window in (long, short):
                    query, reduced = next(letters), next(letters)
                    # The minimum-traffic guard on the long window: an endpoint with fewer requests has no value.
                    guarded = window == long
                    text = (influxql_burn(objective, guarded) if language == "influxql"
                            else flux_burn(objective, guarded=guarded))
                    data.append(grafana_query(query, datasource, language, text, SECONDS[window]))
                    data.append(grafana_reduce(reduced, query))
                    pair.append(f"${reduced} > {factor}")
                if severity == "page":
                    # The page guard: PAGE_MIN_FAILURES failed requests in the short window.
                    query, reduced = next(letters), next(letters)
                    data.append(grafana_query(query, datasource, language, grafana_failures_query(language, objective),
                                              SECONDS[short]))
                    data.append(grafana_reduce(reduced, query))
                    pair.append(f"${reduced} >= {PAGE_MIN_FAILURES}")
                conditions.append("(" + " && ".join(pair) + ")")
            budget, budget_reduced, condition = next(letters), next(letters), next(letters)
            text = influxql_burn(objective) if language == "influxql" else flux_burn(objective)
            data.append(grafana_query(budget, datasource, language, text, SECONDS["30d"]))
            data.append(grafana_reduce(budget_reduced, budget))
            data.append(grafana_expression(condition, "math", expression=" || ".join(conditions)))
            long_ref = "B"  # the first arm's long window, reduced
            rules.append({
                "uid": f"apihealth-{language}-{objective}-{severity}",
                "title": f"{alert_name(objective, severity)} ({'InfluxQL' if language == 'influxql' else 'Flux'})",
                "condition": condition,
                "data": data,
                "noDataState": "OK",
                "execErrState": "Error",
                "for": duration,
                "labels": {"severity": severity, "objective": objective},
                "annotations": {
                    "summary": (f"{{{{ $labels.method }}}} {{{{ $labels.host }}}}{{{{ $labels.path }}}} burns its "
                                f"{objective} budget ({{{{ $labels.service }}}})"),
                    "description": (
                        f"Requests from {{{{ $labels.service }}}} (module {{{{ $labels.module }}}}) to "
                        f"{{{{ $labels.method }}}} https://{{{{ $labels.host }}}}{{{{ $labels.path }}}} "
                        f"from {GRAFANA_PLACE_WORDS} "
                        f"{OBJECTIVES[objective]['what']} {{{{ humanize $values.{long_ref}.Value }}}} times as often "
                        f"as the {objective} objective allows over {arms[0][1]} (a burn rate of 1 spends the 30-day "
                        f"budget in 30 days; this alert needs "
                        + " or ".join(f"{factor} over {long} and {short}" for factor, long, short in arms)
                        + f"). Error budget left over 30 days: {{{{ humanizePercentage $values.{budget_reduced}.Value }}}}."
                    ),
                },
            })
    if language == "influxql":
        silence = INFLUXQL_AGENT_SILENCE
        loss = INFLUXQL_AGENT_LOSS
    else:
        silence, loss = flux_agent_silence(), flux_agent_loss()
    silent_seconds = SELF_METRICS_INTERVAL_SECONDS * MISSED_HEALTH_POINTS
    rules.append({
        "uid": f"apihealth-{language}-agent-silent",
        "title": f"APIHealthAgentStoppedReporting ({'InfluxQL' if language == 'influxql' else 'Flux'})",
        "condition": "C",
        "data": [grafana_query("A", datasource, language, silence, SECONDS["1h"]),
                 grafana_reduce("B", "A"),
                 # InfluxQL: the health points an interval, over the last intervals; Flux: the seconds since
                 # the last one.
                 grafana_expression("C", "math", expression=("$B == 0" if language == "influxql"
                                                             else f"$B > {silent_seconds}"))],
        "noDataState": "OK",
        "execErrState": "Error",
        "for": "0s",
        "labels": {"severity": "ticket"},
        "annotations": {"summary": "APIHealth in {{ $labels.service }} {{ $labels.instance }} stopped reporting",
                        "description": "No APIHealth health point for 3 intervals: the process stopped or cannot "
                                       "reach the server, and what it calls is not measured."},
    })
    rules.append({
        "uid": f"apihealth-{language}-agent-losing",
        "title": f"APIHealthAgentLosingPoints ({'InfluxQL' if language == 'influxql' else 'Flux'})",
        "condition": "C",
        "data": [grafana_query("A", datasource, language, loss, 600), grafana_reduce("B", "A"),
                 grafana_expression("C", "math", expression="$B > 0")],
        "noDataState": "OK",
        "execErrState": "Error",
        "for": "0s",
        "labels": {"severity": "ticket"},
        "annotations": {"summary": "APIHealth in {{ $labels.service }} {{ $labels.instance }} is losing points",
                        "description": "{{ $values.B.Value }} points dropped, lost, rejected or expired in 10 min: "
                                       "the dashboards and alerts undercount. The agent's last_error says why."},
    })
    rules += grafana_reachability_rules(language, datasource)
    rules.append(grafana_steady_failure_rule(language, datasource))
    for rule in rules:
        rule["annotations"]["runbook_url"] = runbook_url(rule["title"].split(" (")[0])
        rule["annotations"]["dashboard"] = GRAFANA_DASHBOARD_LINK[language]
    return rules


def grafana_delivery():
    """A contact point per severity (a webhook) and a notification policy grouping as Alertmanager does. Grafana has no
    inhibition: a ticket of an endpoint that also pages is sent too, and so is a burn-rate page of a place whose
    reachability page fires."""
    contact_points = [{
        "orgId": 1, "name": f"apihealth-{severity}",
        "receivers": [{"uid": f"apihealth-{severity}-webhook", "type": "webhook",
                       "settings": {"url": f"{WEBHOOK}/{severity}", "httpMethod": "POST"},
                       "disableResolveMessage": False}],
    } for severity in ("page", "ticket")]
    policy = {
        "orgId": 1, "receiver": "apihealth-ticket", "group_by": GROUP_BY,
        "group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h",
        "routes": [
            {"receiver": "apihealth-page", "object_matchers": [["severity", "=", "page"],
                                                               ["alertname", "=~", "APIHealthReachability.*"]],
             "group_by": REACHABILITY_GROUP_BY, "group_wait": "10s", "repeat_interval": "1h"},
            {"receiver": "apihealth-page", "object_matchers": [["severity", "=", "page"]], "group_wait": "10s",
             "repeat_interval": "1h"},
            {"receiver": "apihealth-ticket", "object_matchers": [["severity", "=", "ticket"]],
             "repeat_interval": "24h"},
        ],
    }
    return {"apiVersion": 1, "contactPoints": contact_points, "policies": [policy]}


def grafana_alerting(language, datasource):
    return {
        "apiVersion": 1,
        "groups": [{
            "orgId": 1,
            "name": f"apihealth-{language}",
            "folder": "APIHealth",
            "interval": EVALUATION_INTERVAL,
            "rules": grafana_rules(language, datasource),
        }],
    }


# ----------------------------------------------------------------------------------------------------------------
# InfluxDB 2 template: threshold checks, an HTTP endpoint, notification rules
# ----------------------------------------------------------------------------------------------------------------

def influxdb_check_query(objective, factor, long, short):
    """A check's query: min(burn over long, burn over short) / factor per endpoint, as the field "burn_over_limit":
    above 1 when both windows burn faster than factor."""
    def window(name, seconds):
        body = flux_burn(objective, bucket="apihealth", guarded=name == long).replace(
            "range(start: v.timeRangeStart, stop: v.timeRangeStop)", f"range(start: -{name})")
        return body.replace("data = ", f"data_{name} = ").replace("data\n", f"data_{name}\n") \
                   .replace("counts = ", f"counts_{name} = ").replace("counts |>", f"counts_{name} |>") \
                   .replace("objective = ", f"objective_{name} = ").replace(", objective]", f", objective_{name}]") \
                   .replace("union(tables:", f"burn_{name} = union(tables:")
    return (window(long, SECONDS[long]) + "\n" + window(short, SECONDS[short]) + "\n"
            f"union(tables: [burn_{long}, burn_{short}])\n"
            f"    |> group(columns: [\"_value\"], mode: \"except\")\n"
            # The slower of the two burn rates, where both windows have one (the long one only with the minimum
            # traffic of the guard).
            f"    |> reduce(identity: {{windows: 0, slower: 0.0}}, fn: (r, accumulator) => ({{windows: accumulator.windows + 1, "
            f"slower: if accumulator.windows == 0 or r._value < accumulator.slower then r._value else accumulator.slower}}))\n"
            f"    |> filter(fn: (r) => r.windows == 2)\n"
            f"    |> map(fn: (r) => ({{r with _measurement: \"{INTERVAL}\", _field: \"burn_over_limit\", "
            f"_value: r.slower / {float(factor)}, _time: now()}}))\n"
            f"    |> drop(columns: [\"windows\", \"slower\"])\n"
            # The check reads the field its query's last _field filter names (fieldsAsCols makes it a column).
            f"    |> filter(fn: (r) => r._field == \"burn_over_limit\")\n")

def flux_key(tags, name):
    """A Flux map() field `name` joining `tags` (missing ones empty): a key to join places and hosts on, whichever of
    the optional tags (env, region) a service writes."""
    parts = ' + "|" + '.join(f'(if exists r.{tag} then r.{tag} else "")' for tag in tags)
    return f"{name}: {parts}"


def influxdb_reachability_query(what):
    """An InfluxDB check's query of one reachability alert: per host, service, env and place (PLACE_KEPT, every other
    tag summed), the share of its requests failing (`what`: transport_errors, server_errors) over REACHABILITY_WINDOW
    against the rest of the host's traffic, as the field "unreachable_over_limit": the share here over its limit (the
    larger of REACHABILITY_MIN_SHARE and REACHABILITY_FACTOR times the share elsewhere, at most
    REACHABILITY_OUTAGE_SHARE; that alone where the host has no other place), for places with at least MIN_REQUESTS
    requests and failures from MIN_FAILING_SOURCES installs within one INSTALL_INTERVAL (above 1: the alert's
    condition)."""
    field, status_class = {"transport_errors": (ERRORS, "error"), "server_errors": (COUNT, "5xx")}[what]
    failed = f'r._field == "{field}" and r.{STATUS_CLASS} == "{status_class}"'
    return f"""// Reachability: {what} per host and place, against the rest of the host's traffic
import "join"

rows = from(bucket: "apihealth")
    |> range(start: -{REACHABILITY_WINDOW})
    |> filter(fn: (r) => r._measurement == "{INTERVAL}" and (r._field == "{COUNT}" or r._field == "{ERRORS}"))
    |> map(fn: (r) => ({{r with {flux_key(PLACE_KEPT, "place")}, {flux_key(HOST_KEPT, "host_key")}}}))

sources = rows
    |> filter(fn: (r) => {failed} and r._value > 0)
    |> group(columns: ["place"])
    |> aggregateWindow(every: {INSTALL_INTERVAL}, fn: count, createEmpty: false)
    |> max()
    |> map(fn: (r) => ({{place: r.place, sources: float(v: r._value)}}))
    |> group()

place = rows
    |> map(fn: (r) => ({{r with requests: if r._field == "{COUNT}" then float(v: r._value) else 0.0, failed: if {failed} then float(v: r._value) else 0.0}}))
    |> group(columns: {json.dumps(PLACE_KEPT + ["place", "host_key"])})
    |> reduce(identity: {{requests: 0.0, failed: 0.0}}, fn: (r, accumulator) => ({{requests: accumulator.requests + r.requests, failed: accumulator.failed + r.failed}}))
    |> group()

host = place
    |> group(columns: ["host_key"])
    |> reduce(identity: {{host_requests: 0.0, host_failed: 0.0}}, fn: (r, accumulator) => ({{host_requests: accumulator.host_requests + r.requests, host_failed: accumulator.host_failed + r.failed}}))
    |> group()

counted = join.inner(left: place, right: host, on: (l, r) => l.host_key == r.host_key, as: (l, r) => ({{l with host_requests: r.host_requests, host_failed: r.host_failed}}))
join.inner(left: counted, right: sources, on: (l, r) => l.place == r.place, as: (l, r) => ({{l with sources: r.sources}}))
    |> filter(fn: (r) => r.requests >= {float(MIN_REQUESTS)} and r.sources >= {float(MIN_FAILING_SOURCES)})
    |> map(fn: (r) => {{
        elsewhere_requests = r.host_requests - r.requests
        share_here = r.failed / r.requests
        share_elsewhere = if elsewhere_requests > 0.0 then (r.host_failed - r.failed) / elsewhere_requests else 0.0
        relative = if {float(REACHABILITY_FACTOR)} * share_elsewhere > {REACHABILITY_MIN_SHARE} then {float(REACHABILITY_FACTOR)} * share_elsewhere else {REACHABILITY_MIN_SHARE}
        limit = if elsewhere_requests <= 0.0 or relative > {REACHABILITY_OUTAGE_SHARE} then {REACHABILITY_OUTAGE_SHARE} else relative
        return {{r with _measurement: "{INTERVAL}", _field: "unreachable_over_limit", _value: share_here / limit, _time: now(), share_here: share_here, share_elsewhere: share_elsewhere}}
    }})
    |> drop(columns: ["host_requests", "host_failed", "place", "host_key"])
    |> filter(fn: (r) => r._field == "unreachable_over_limit")
"""


def influxdb_steady_failure_query():
    """An InfluxDB check's query of the failing-steadily ticket: per endpoint and place, over STEADY_WINDOW, the smaller
    of failures over STEADY_MIN_FAILURES and the failing share over STEADY_MIN_SHARE, as the field
    "failing_over_limit" (above 1: both over), for endpoints that failed in the last hour too."""
    return f"""// Failing steadily: per endpoint and place, over {STEADY_WINDOW}
import "join"

from(bucket: "apihealth")
    |> range(start: -{STEADY_WINDOW})
    |> filter(fn: (r) => r._measurement == "{INTERVAL}" and (r._field == "{COUNT}" or r._field == "{ERRORS}"))
    |> map(fn: (r) => ({{r with requests: if r._field == "{COUNT}" then float(v: r._value) else 0.0, failed: if r._field == "{ERRORS}" then float(v: r._value) else 0.0, failing_points: if r._field == "{ERRORS}" and r._value > 0 then 1.0 else 0.0, last_hour: if r._field == "{ERRORS}" and r._time > date.sub(d: 1h, from: now()) then float(v: r._value) else 0.0}}))
    |> group(columns: {json.dumps(ENDPOINT_KEPT)})
    |> reduce(identity: {{requests: 0.0, failed: 0.0, failing_points: 0.0, last_hour: 0.0}}, fn: (r, accumulator) => ({{requests: accumulator.requests + r.requests, failed: accumulator.failed + r.failed, failing_points: accumulator.failing_points + r.failing_points, last_hour: accumulator.last_hour + r.last_hour}}))
    |> filter(fn: (r) => r.requests > 0.0 and r.last_hour > 0.0 and r.failing_points >= {float(MIN_FAILING_SOURCES)})
    |> map(fn: (r) => {{
        by_count = r.failed / {float(STEADY_MIN_FAILURES)}
        by_share = r.failed / r.requests / {STEADY_MIN_SHARE}
        return {{r with _measurement: "{INTERVAL}", _field: "failing_over_limit", _value: if by_count < by_share then by_count else by_share, _time: now(), share: r.failed / r.requests}}
    }})
    |> drop(columns: ["requests", "failed", "failing_points", "last_hour"])
    |> filter(fn: (r) => r._field == "failing_over_limit")
""".replace('import "join"\n', 'import "date"\n')


def influxdb_resources():
    resources = [{
        "apiVersion": "influxdata.com/v2alpha1", "kind": "NotificationEndpointHTTP",
        "metadata": {"name": "apihealth-alerts"},
        "spec": {"name": "APIHealth alerts", "description": "Where the APIHealth checks' notifications go: change the "
                 "URL to your receiver (a webhook, an incident tool).", "method": "POST", "type": "none",
                 "url": "http://alert-receiver:9000/apihealth"},
    }]
    for objective in OBJECTIVES:
        for severity, _, arms in SEVERITIES:
            for factor, long, short in arms:
                name = f"apihealth-{objective}-burn-{long}-{short}"
                resources.append({
                    "apiVersion": "influxdata.com/v2alpha1", "kind": "CheckThreshold", "metadata": {"name": name},
                    "spec": {
                        "name": f"{alert_name(objective, severity)} {long}/{short}",
                        "description": (f"The {objective} error budget of an endpoint burning faster than {factor}x "
                                        f"over {long} and over {short} ({severity}). The value is the slower of "
                                        f"the two burn rates over {factor}."),
                        "every": EVALUATION_INTERVAL, "offset": "0s",
                        "query": influxdb_check_query(objective, factor, long, short),
                        "statusMessageTemplate": (
                            f"${{ r.method }} ${{ r.host }}${{ r.path }} ({{r.service}}){FLUX_COUNTRY} burns its {objective} "
                            f"budget: ${{ string(v: r.burn_over_limit * {float(factor)}) }}x over {long} and "
                            f"{short} (limit {factor}x)").replace("{r.service}", "${ r.service }"),
                        "tags": [{"key": "severity", "value": severity}],
                        "thresholds": [{"type": "greater", "level": "CRIT" if severity == "page" else "WARN",
                                        "value": 1.0}],
                    },
                })
    for alert, what, failing in (("APIHealthReachabilityTransportErrors", "transport_errors", "end in a transport error"),
                                 ("APIHealthReachabilityServerErrors", "server_errors", "get a 5xx response")):
        resources.append({
            "apiVersion": "influxdata.com/v2alpha1", "kind": "CheckThreshold",
            "metadata": {"name": f"apihealth-reachability-{what.replace('_', '-')}"},
            "spec": {
                "name": alert,
                "description": (f"Requests from one place (country, region, env) to a host that {failing} more than "
                                f"{REACHABILITY_MIN_SHARE:.0%} of the time and {REACHABILITY_FACTOR}x the host's share "
                                f"from everywhere else, over {REACHABILITY_WINDOW}, with at least {MIN_REQUESTS} "
                                "requests. No objective needed. The value is the share here over that limit."),
                "every": EVALUATION_INTERVAL, "offset": "0s",
                "query": influxdb_reachability_query(what),
                "statusMessageTemplate": (
                    f"${{ r.service }}: ${{ r.host }}{FLUX_COUNTRY}: "
                    f"${{ string(v: r.share_here * 100.0) }}% of requests {failing} (${{ string(v: r.failed) }} of "
                    f"${{ string(v: r.requests) }}, from ${{ string(v: r.sources) }} installs at once), against "
                    f"${{ string(v: r.share_elsewhere * 100.0) }}% from everywhere else. Runbook: "
                    f"{runbook_url(alert)}"),
                "tags": [{"key": "severity", "value": "page"}],
                "thresholds": [{"type": "greater", "level": "CRIT", "value": 1.0}],
            },
        })
    resources.append({
        "apiVersion": "influxdata.com/v2alpha1", "kind": "CheckThreshold",
        "metadata": {"name": "apihealth-failing-steadily"},
        "spec": {
            "name": "APIHealthEndpointFailingSteadily",
            "description": (f"An endpoint failing steadily whatever its traffic: at least {STEADY_MIN_FAILURES} "
                            f"failures over {STEADY_WINDOW}, more than {STEADY_MIN_SHARE:.0%} of its requests, and "
                            "some in the last hour (ticket)."),
            "every": EVALUATION_INTERVAL, "offset": "0s",
            "query": influxdb_steady_failure_query(),
            "statusMessageTemplate": (
                f"${{ r.method }} ${{ r.host }}${{ r.path }} (${{ r.service }}){FLUX_COUNTRY} has been failing for "
                f"hours: ${{ string(v: r.share * 100.0) }}% of its requests over {STEADY_WINDOW}"),
            "tags": [{"key": "severity", "value": "ticket"}],
            "thresholds": [{"type": "greater", "level": "WARN", "value": 1.0}],
        },
    })
    for severity, level in (("page", "CRIT"), ("ticket", "WARN")):
        resources.append({
            "apiVersion": "influxdata.com/v2alpha1", "kind": "NotificationRuleHTTP",
            "metadata": {"name": f"apihealth-{severity}"},
            "spec": {
                "name": f"APIHealth {severity}", "endpointName": "apihealth-alerts", "every": EVALUATION_INTERVAL,
                "offset": "0s", "messageTemplate": f"{severity}:{FLUX_COUNTRY} ${{ r._message }}",
                # A notice when the level changes to this severity's, and a recovery notice when it goes back to OK:
                # not one a minute while it lasts.
                "statusRules": [{"currentLevel": level, "previousLevel": "OK"},
                                {"currentLevel": "OK", "previousLevel": level}],
                "tagRules": [{"key": "severity", "value": severity, "operator": "equal"}],
            },
        })
    return resources


def write_all(root):
    alerts = root / "alerts"
    alerts.mkdir(exist_ok=True)
    header = ("# Generated by scripts/build-dashboards (scripts/alerting.py): edit those, not this file.\n"
              "# vmalert: vmalert -rule='dashboards/alerts/*.rules.yml' -datasource.url=http://victoria:8428 "
              "-remoteWrite.url=http://victoria:8428 -notifier.url=http://alertmanager:9093\n")
    (alerts / "apihealth.rules.yml").write_text(header + yaml(vmalert_rules()) + "\n")
    (alerts / "apihealth.recording.rules.yml").write_text(
        "# Generated by scripts/build-dashboards (scripts/alerting.py): edit those, not this file.\n"
        "# The windows the alerts of apihealth.rules.yml read, recorded once per evaluation: load both files\n"
        "# (vmalert -rule='dashboards/alerts/*.rules.yml' ... -remoteWrite.url=<the datasource's write URL>).\n"
        + yaml(recording_groups()) + "\n")
    provisioning = root / "grafana" / "provisioning" / "alerting"
    provisioning.mkdir(exist_ok=True)
    for language, datasource in (("influxql", "apihealth-influxql"), ("flux", "apihealth-influxdb")):
        (provisioning / f"apihealth-{language}.yml").write_text(
            "# Generated by scripts/build-dashboards (scripts/alerting.py): Grafana alert rules on the "
            f"{language} datasource.\n" + yaml(grafana_alerting(language, datasource)) + "\n")
    (provisioning / "apihealth-delivery.yml").write_text(
        "# Generated by scripts/build-dashboards (scripts/alerting.py): where Grafana sends the APIHealth alerts,\n"
        "# grouped by alert, host and country like dashboards/alerts/alertmanager.yml. Change the webhook URLs.\n"
        + yaml(grafana_delivery()) + "\n")
    path = root / "influxdb" / "apihealth-template.json"
    template = json.loads(path.read_text())
    template = [item for item in template if item["kind"] in ("Variable", "Dashboard")] + influxdb_resources()
    path.write_text(json.dumps(template, indent=2) + "\n")
    print("dashboards/alerts/apihealth.rules.yml, grafana/provisioning/alerting/apihealth-{influxql,flux}.yml and "
          "the template's checks written")
