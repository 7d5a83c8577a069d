package api

// MetricsPath is where a cube server (on its port and its probe port) and the transfer (on
// its --listen port) serve their Prometheus metrics, GET.
const MetricsPath = "/metrics"
