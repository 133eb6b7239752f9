// Package deploy holds the operator's files for `sandboxd serve`, not
// code: the Grafana dashboard (grafana-dashboard.json), the Prometheus
// alerts and their unit tests (alerts.yml, alerts_test.yml) and the
// systemd units (sandboxd.service, sandboxd.socket). Its tests check
// them against the metrics the daemon exports and with the tools that
// read them (promtool, systemd-analyze).
//
// Of sandboxd's packages it imports none.
package deploy
