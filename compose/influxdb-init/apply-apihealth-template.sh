#!/bin/bash
# Applies the APIHealth InfluxDB template (dashboard and variables) once, when the influxdb:2 image sets
# itself up on first start: the image runs the *.sh files of /docker-entrypoint-initdb.d after
# `influx setup`, with the admin's CLI configuration active and INFLUX_HOST pointing at the server.
# docker-compose.yml mounts dashboards/influxdb at /templates and this folder here.
set -euo pipefail

influx apply \
    --file /templates/apihealth-template.json \
    --org "${DOCKER_INFLUXDB_INIT_ORG}" \
    --force yes
