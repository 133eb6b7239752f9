package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// metrics are the series the daemon exports (issue 31), each with its
// labels; a histogram's name stands for its _bucket (with le), _sum and
// _count series. A dashboard or alert that names anything else shows or
// watches nothing.
var metrics = map[string]metric{
	"sandboxd_boundaries_total":                       {labels: []string{"surface", "decision", "source"}},
	"sandboxd_review_duration_seconds":                {labels: []string{"reviewer"}, histogram: true},
	"sandboxd_review_tokens_total":                    {labels: []string{"direction"}},
	"sandboxd_review_faults_total":                    {labels: []string{"class"}},
	"sandboxd_grants_total":                           {labels: []string{"event"}},
	"sandboxd_exec_total":                             {labels: []string{"outcome"}},
	"sandboxd_exec_duration_seconds":                  {histogram: true},
	"sandboxd_exec_setup_seconds":                     {histogram: true},
	"sandboxd_proxy_connections_total":                {labels: []string{"decision", "via"}},
	"sandboxd_proxy_bytes_total":                      {labels: []string{"direction"}},
	"sandboxd_circuit_breaker_trips_total":            {},
	"sandboxd_detection_lost_total":                   {},
	"sandboxd_audit_write_failures_total":             {},
	"sandboxd_active_execs":                           {},
	"sandboxd_pending_questions":                      {},
	"sandboxd_ready_helpers":                          {},
	"sandboxd_ready_helper_hits_total":                {},
	"sandboxd_ready_helper_misses_total":              {},
	"sandboxd_ready_helper_expired_total":             {},
	"sandboxd_ready_helper_prepare_cpu_seconds_total": {},
	"sandboxd_build_info":                             {labels: []string{"version", "landlock_abi"}},
	// The Go and process collectors of client_golang (the ones used).
	"go_goroutines":                 {runtime: true},
	"go_threads":                    {runtime: true},
	"go_memstats_heap_inuse_bytes":  {runtime: true},
	"process_resident_memory_bytes": {runtime: true},
	"process_cpu_seconds_total":     {runtime: true},
	"process_open_fds":              {runtime: true},
	"process_max_fds":               {runtime: true},
	"process_start_time_seconds":    {runtime: true},
}

type metric struct {
	labels    []string
	histogram bool
	runtime   bool // a collector's, not sandboxd's own
}

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"instance", "job"}

// series resolves a series name to its metric and its labels.
func series(name string) (string, []string, bool) {
	if m, ok := metrics[name]; ok && !m.histogram {
		return name, m.labels, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(name, suffix)
		if m, ok := metrics[base]; found && ok && m.histogram {
			if suffix == "_bucket" {
				return base, append(slices.Clone(m.labels), "le"), true
			}
			return base, m.labels, true
		}
	}
	return "", nil, false
}

// promqlFuncs are the functions and aggregations an expression may call.
var promqlFuncs = []string{"rate", "irate", "increase", "delta", "sum", "avg", "min", "max", "count",
	"histogram_quantile", "absent", "absent_over_time", "max_over_time", "min_over_time", "avg_over_time",
	"changes", "resets", "clamp_min", "topk", "bottomk", "time", "vector", "scalar", "label_values"}

// promqlKeywords take no part in naming series; groupers take a label
// list.
var (
	promqlKeywords = []string{"and", "or", "unless", "bool", "offset"}
	groupers       = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
)

var identRE = regexp.MustCompile(`^[A-Za-z_:][A-Za-z0-9_:]*$`)

var tokenRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\[[^\]]*\]|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|[A-Za-z_:][A-Za-z0-9_:]*|[0-9.]+[a-z]*|=~|!~|!=|==|>=|<=|\S`)

// names reads a PromQL expression (with Grafana's variables) for the
// series it names and the labels it matches or groups by.
func names(expr string) (seriesNames, labelNames []string, err error) {
	toks := tokenRE.FindAllString(expr, -1)
	braces, grouping := 0, false
	for i, t := range toks {
		next := ""
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		isIdent := identRE.MatchString(t)
		switch {
		case t == "{":
			braces++
		case t == "}":
			braces--
		case t == ")" && grouping:
			grouping = false
		case !isIdent:
		case braces > 0 || grouping:
			labelNames = append(labelNames, t)
		case slices.Contains(groupers, t):
			if next != "(" {
				return nil, nil, fmt.Errorf("%q without its label list", t)
			}
			grouping = true
		case next == "(" || slices.Contains(groupers, next): // a call, or an aggregation's grouping first
			if !slices.Contains(promqlFuncs, t) {
				return nil, nil, fmt.Errorf("unknown function %q", t)
			}
		case slices.Contains(promqlKeywords, t):
		default:
			seriesNames = append(seriesNames, t)
		}
	}
	if braces != 0 || grouping {
		return nil, nil, fmt.Errorf("unbalanced braces or parentheses")
	}
	if len(seriesNames) == 0 {
		return nil, nil, fmt.Errorf("names no series")
	}
	return seriesNames, labelNames, nil
}

// checkExpr fails unless every series expr names is a metric the daemon
// exports (or, when extra allows it, one of extra) and every label it
// uses is one of theirs; it returns the metrics named.
func checkExpr(expr string, extra map[string][]string) ([]string, error) {
	ss, ls, err := names(expr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	allowed := slices.Clone(targetLabels)
	var used []string
	for _, s := range ss {
		base, labels, ok := series(s)
		if !ok {
			if l, ok := extra[s]; ok {
				allowed = append(allowed, l...)
				continue
			}
			return nil, fmt.Errorf("%s: names %q, which sandboxd does not export", expr, s)
		}
		used = append(used, base)
		allowed = append(allowed, labels...)
	}
	for _, l := range ls {
		if !slices.Contains(allowed, l) {
			return nil, fmt.Errorf("%s: uses the label %q, which none of its series has", expr, l)
		}
	}
	return used, nil
}

func TestCheckExprCatches(t *testing.T) {
	for _, c := range []struct {
		expr string
		ok   bool
	}{
		{`sum by (source) (rate(sandboxd_boundaries_total{instance=~"$instance"}[$__rate_interval]))`, true},
		{`histogram_quantile(0.99, sum by (le, reviewer) (rate(sandboxd_review_duration_seconds_bucket[5m])))`, true},
		{`sum(rate(sandboxd_boundary_total[5m]))`, false},                 // a misspelt metric
		{`sum by (le) (rate(sandboxd_exec_duration_seconds[5m]))`, false}, // a histogram without its suffix
		{`sum by (le) (rate(sandboxd_exec_total_bucket[5m]))`, false},     // a counter with one
		{`sum by (path) (rate(sandboxd_boundaries_total[5m]))`, false},    // a label it never has
		{`rate(sandboxd_grants_total{evnt="issued"}[5m])`, false},         // a misspelt label
		{`sum(rate(sandboxd_exec_total[5m])) / sum(rate(nope_total[5m]))`, false},
		{`ratez(sandboxd_exec_total[5m])`, false}, // an unknown function
		{`up{job="sandboxd"} == 0`, false},        // up is Prometheus's, allowed only where said
	} {
		_, err := checkExpr(c.expr, nil)
		if (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok=%v", c.expr, err, c.ok)
		}
	}
}

// panelJSON is what the test reads of a panel.
type panelJSON struct {
	Title      string          `json:"title"`
	Type       string          `json:"type"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []panelJSON `json:"panels"`
}

type dashboardJSON struct {
	SchemaVersion int `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource json.RawMessage `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panelJSON `json:"panels"`
}

// usesDatasourceVar reports whether raw is {"type":"prometheus","uid":
// "${datasource}"}: the panel follows the dashboard's data source
// variable instead of a data source of the machine it was made on.
func usesDatasourceVar(raw json.RawMessage) bool {
	var ds struct{ Type, UID string }
	return json.Unmarshal(raw, &ds) == nil && ds.Type == "prometheus" && (ds.UID == "${datasource}" || ds.UID == "$datasource")
}

// The dashboard is valid JSON for a current Grafana, every panel and
// query reads the data source variable, every query names only
// sandboxd's metrics with their labels, and every sandboxd metric is on
// it.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboardJSON
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: not a current Grafana's (36 and later have data source variables by uid)", d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Name == "datasource" && (v.Type != "datasource" || string(v.Query) != `"prometheus"`) {
			t.Errorf("the datasource variable is %s %s, want a datasource variable of prometheus", v.Type, v.Query)
		}
		if v.Name == "instance" {
			if !usesDatasourceVar(v.Datasource) {
				t.Errorf("the instance variable does not read the data source variable")
			}
			var q struct{ Query string }
			json.Unmarshal(v.Query, &q)
			m := regexp.MustCompile(`^label_values\((\w+), *instance\)$`).FindStringSubmatch(q.Query)
			if _, _, ok := series(m[1]); m == nil || !ok {
				t.Errorf("the instance variable's query %q lists no sandboxd metric's instances", q.Query)
			}
		}
	}
	if vars["datasource"] != "datasource" || vars["instance"] != "query" {
		t.Errorf("variables %v: want datasource (datasource) and instance (query)", vars)
	}
	seen := map[string]bool{}
	var walk func([]panelJSON)
	walk = func(ps []panelJSON) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if !usesDatasourceVar(p.Datasource) {
				t.Errorf("panel %q: its datasource is %s, not the ${datasource} variable", p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, q := range p.Targets {
				if !usesDatasourceVar(q.Datasource) {
					t.Errorf("panel %q: a query's datasource is %s", p.Title, q.Datasource)
				}
				if !strings.Contains(q.Expr, `instance=~"$instance"`) {
					t.Errorf("panel %q: %s ignores the instance variable", p.Title, q.Expr)
				}
				used, err := checkExpr(q.Expr, nil)
				if err != nil {
					t.Errorf("panel %q: %v", p.Title, err)
				}
				for _, m := range used {
					seen[m] = true
				}
			}
		}
	}
	walk(d.Panels)
	var missing []string
	for name, m := range metrics {
		if !m.runtime && !seen[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("no panel shows %v", missing)
	}
}
