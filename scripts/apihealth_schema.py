"""The names the agent writes, for the generators (scripts/build-dashboards, scripts/alerting.py): read from
dashboards/schema.json, which is what `influx-tail --schema` prints from the Swift schema (PointSchema). A name is
looked up by the Swift member that defines it (INTERVAL_FIELD["requestsWithinLatencyObjective"]), so a generator
never retypes one: a member the schema lost fails the generator with a KeyError, and a test fails when
dashboards/schema.json and the Swift schema differ. After changing PointSchema:

    swift run influx-tail --schema > dashboards/schema.json && scripts/build-dashboards
"""
import json
import pathlib

_schema = json.loads((pathlib.Path(__file__).resolve().parent.parent / "dashboards" / "schema.json").read_text())

MEASUREMENT = _schema["measurements"]
TAG = _schema["tags"]
FIELD = _schema["fields"]
INTERVAL_FIELD = _schema["intervalFields"]
AGENT_FIELD = _schema["agentFields"]
RELAY_FIELD = _schema["relayFields"]
FIELD_TYPES = _schema["fieldTypes"]
LISTS = _schema["lists"]
CACHE_AGE_BOUNDS = _schema["cacheAgeBounds"]
