# Sourced by the scripts that start the real servers on loopback (scripts/test, scripts/app-installs):
# free ports, waiting for a server to answer, and a launch_<name> per server. The sourcing script sets
# `work` (a temporary folder) and `pids` (an array the servers' pids are added to, for its cleanup).

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Waits until `url` answers: 0 then, 1 if the server's process `pid` exits first; gives up after 60 s.
wait_for() { # name pid url
    for _ in $(seq 1 300); do
        kill -0 "$2" 2>/dev/null || return 1
        if curl -fsS -o /dev/null "$3" 2>/dev/null; then return 0; fi
        sleep 0.2
    done
    echo "$0: $1 did not answer within 60 s; its log:" >&2
    tail -n 40 "$work/$1.log" >&2 || true
    exit 1
}

# Each launch_<name> starts a server on fresh free ports, setting server_pid and health (its URL).
launch_influxdb() {
    influx_http="$(free_port)"
    influx_rpc="$(free_port)"
    rm -rf "$work/influxdb"
    mkdir -p "$work/influxdb"
    cat >"$work/influxdb.conf" <<CONF
reporting-disabled = true
bind-address = "127.0.0.1:$influx_rpc"
[meta]
  dir = "$work/influxdb/meta"
[data]
  dir = "$work/influxdb/data"
  wal-dir = "$work/influxdb/wal"
  query-log-enabled = false
[http]
  bind-address = "127.0.0.1:$influx_http"
  log-enabled = false
  max-body-size = 0
[monitor]
  store-enabled = false
[continuous_queries]
  enabled = false
CONF
    influxd -config "$work/influxdb.conf" >"$work/influxdb.log" 2>&1 &
    server_pid=$!
    pids+=("$server_pid")
    health="http://127.0.0.1:$influx_http/ping"
}

launch_victoria() {
    victoria_port="$(free_port)"
    rm -rf "$work/victoria"
    victoria-metrics -storageDataPath "$work/victoria" -httpListenAddr "127.0.0.1:$victoria_port" \
        -retentionPeriod=100y -search.latencyOffset=0s -loggerLevel=ERROR >"$work/victoria.log" 2>&1 &
    server_pid=$!
    pids+=("$server_pid")
    health="http://127.0.0.1:$victoria_port/health"
}

# A port is free when it is picked and bound by the server a moment later: on a shared machine
# another process (another run of this script) can take it in between. A server that exits before
# it answers is started again on other ports.
start() { # name
    for attempt in 1 2 3 4 5; do
        "launch_$1"
        if wait_for "$1" "$server_pid" "$health"; then return 0; fi
        echo "$0: $1 exited before it answered (a port taken?); trying other ports ($attempt of 5)" >&2
    done
    echo "$0: $1 did not start; its log:" >&2
    tail -n 40 "$work/$1.log" >&2 || true
    exit 1
}

