# The demo service and apihealth-relay (run with `--entrypoint apihealth-relay`), built with the official Swift image.
FROM swift:6.1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends zlib1g-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --product apihealth-demo && cp "$(swift build -c release --show-bin-path)/apihealth-demo" /apihealth-demo
RUN swift build -c release --product apihealth-relay && cp "$(swift build -c release --show-bin-path)/apihealth-relay" /apihealth-relay

FROM swift:6.1-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends zlib1g libdeflate0 ca-certificates curl && rm -rf /var/lib/apt/lists/*
COPY --from=build /apihealth-demo /usr/local/bin/apihealth-demo
COPY --from=build /apihealth-relay /usr/local/bin/apihealth-relay
ENV APIHEALTH_SPOOL_DIR=/var/lib/apihealth
VOLUME /var/lib/apihealth
ENTRYPOINT ["apihealth-demo"]
CMD ["--duration", "86400", "--rate", "20"]
