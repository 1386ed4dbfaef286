# orderagg container image: one static binary on an empty base.
#
# No base image can be pulled on this project's machines, so the binary is
# built on the host and copied in (`make images` does all of this):
#
#   CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -tags timetzdata \
#       -o build/out/orderagg ./cmd/orderagg
#   cp /etc/ssl/certs/ca-certificates.crt build/out/
#   docker build -t orderagg:local .
#
# The same image runs the service (default) and the downstream simulators:
#   docker run orderagg:local                      # orderagg serve on :8080
#   docker run orderagg:local sim --addr :9100     # orderagg sim
#
# There is no shell (and no curl) in the image: the health check is the
# binary's own `healthcheck` sub-command (GET /readyz on ORDERAGG_ADDR, exit
# 0/1). A sim container overrides it (see compose.yaml).
FROM scratch

COPY build/out/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY build/out/orderagg /orderagg

# Non-root (the "nonroot" uid/gid of distroless images).
USER 65532:65532
ENV ORDERAGG_ADDR=:8080
EXPOSE 8080

HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=3 CMD ["/orderagg", "healthcheck"]

ENTRYPOINT ["/orderagg"]
CMD ["serve"]
