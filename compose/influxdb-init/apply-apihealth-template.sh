#!/bin/bash
# Applies the APIHealth InfluxDB template (dashboard, variables and checks) once, when the influxdb:2 image sets
# itself up on first start: the image runs the *.sh files of /docker-entrypoint-initdb.d after
# `influx setup`, with the admin's CLI configuration active and INFLUX_HOST pointing at the server.
# docker-compose.yml mounts dashboards/influxdb at /templates and this folder here. The checks' statuses show in
# InfluxDB's UI; their notification endpoint and rules are left out, since Grafana's rules on the same bucket notify
# (each condition is sent once). Apply the whole template where InfluxDB is the only one to notify.
set -euo pipefail

influx apply \
    --file /templates/apihealth-template.json \
    --org "${DOCKER_INFLUXDB_INIT_ORG}" \
    --filter kind=NotificationRuleHTTP \
    --filter kind=NotificationEndpointHTTP \
    --force yes
