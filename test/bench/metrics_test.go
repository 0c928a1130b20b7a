package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// families are the metrics of one scrape, by name.
type families = map[string]*dto.MetricFamily

// scrape reads the manager's /metrics.
func scrape(url string) (families, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// labelled reports whether the metric carries every label=value of want.
func labelled(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}

// counter sums a counter's series that carry the labels.
func counter(fams families, name string, want map[string]string) float64 {
	var sum float64
	if f := fams[name]; f != nil {
		for _, m := range f.GetMetric() {
			if labelled(m, want) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// histogram sums a histogram's series that carry the labels: the count and
// the sum of the observations.
func histogram(fams families, name string, want map[string]string) (count uint64, sum float64) {
	if f := fams[name]; f != nil {
		for _, m := range f.GetMetric() {
			if labelled(m, want) {
				count += m.GetHistogram().GetSampleCount()
				sum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return count, sum
}

// delta is what happened between two scrapes.
type delta struct{ before, after families }

func (d delta) counter(name string, want map[string]string) float64 {
	return counter(d.after, name, want) - counter(d.before, name, want)
}

// histogram is a histogram's observations between the scrapes: how many,
// and their sum.
func (d delta) histogram(name string, want map[string]string) (uint64, float64) {
	c1, s1 := histogram(d.before, name, want)
	c2, s2 := histogram(d.after, name, want)
	if c2 <= c1 {
		return 0, 0
	}
	return c2 - c1, s2 - s1
}

// mean is the average observation of a histogram between the scrapes, and
// how many there were.
func (d delta) mean(name string, want map[string]string) (time.Duration, uint64) {
	n, sum := d.histogram(name, want)
	if n == 0 {
		return 0, 0
	}
	return time.Duration(sum / float64(n) * float64(time.Second)), n
}

// rateWaitMetric is the time the manager's calls waited for its own rate
// limit (pkg/cloud, gate.go).
const rateWaitMetric = "machine_api_provider_cloud_rate_limit_wait_seconds"

// labelValues lists the values one label takes in a metric's series.
func labelValues(fams families, name, label string) []string {
	seen := map[string]bool{}
	if f := fams[name]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					seen[l.GetValue()] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// managerBreakdown describes, from the manager's metrics, where a phase
// spent its time: the machine controller's queue and reconciles, the
// Kubernetes API requests and the cloud calls by operation.
func managerBreakdown(d delta) string {
	var b strings.Builder
	mc := map[string]string{"name": "machine-controller"}
	wait, n := d.mean("workqueue_queue_duration_seconds", mc)
	work, _ := d.mean("workqueue_work_duration_seconds", mc)
	var results []string
	for _, r := range labelValues(d.after, "controller_runtime_reconcile_total", "result") {
		if v := d.counter("controller_runtime_reconcile_total", map[string]string{"controller": "machine-controller", "result": r}); v > 0 {
			results = append(results, fmt.Sprintf("%s %.0f", r, v))
		}
	}
	fmt.Fprintf(&b, "    machine controller: %d reconciles (%s), mean queue wait %s, mean reconcile %s\n",
		n, strings.Join(results, ", "), round(wait), round(work))
	fmt.Fprintf(&b, "    Kubernetes API requests: %s\n", kubeRequests(d))
	var calls []string
	for _, op := range labelValues(d.after, "machine_api_provider_cloud_request_duration_seconds", "operation") {
		mean, n := d.mean("machine_api_provider_cloud_request_duration_seconds", map[string]string{"operation": op})
		if n > 0 {
			calls = append(calls, fmt.Sprintf("%s %d×%s", op, n, round(mean)))
		}
	}
	fmt.Fprintf(&b, "    cloud calls (count × mean, rate-limit wait included): %s\n", strings.Join(calls, ", "))
	if held := d.counter("machine_api_provider_cloud_requests_held_total", nil); held > 0 {
		fmt.Fprintf(&b, "    cloud calls held back by the account's gate: %.0f\n", held)
	}
	return b.String()
}

// kubeRequests describes the manager's requests to the Kubernetes API by
// method.
func kubeRequests(d delta) string {
	var kube []string
	for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if v := d.counter("rest_client_requests_total", map[string]string{"method": method}); v > 0 {
			kube = append(kube, fmt.Sprintf("%s %.0f", method, v))
		}
	}
	return strings.Join(kube, ", ")
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// apiServerRequests reads the API server's request counts by verb and
// resource (subresource after a slash), without watches.
func apiServerRequests(c *rest.Config) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		return nil, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	if f := fams["apiserver_request_total"]; f != nil {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["verb"] == "WATCH" {
				continue
			}
			key := l["verb"] + " " + l["resource"]
			if l["subresource"] != "" {
				key += "/" + l["subresource"]
			}
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

// requestDelta describes the requests between two readings, most first.
func requestDelta(before, after map[string]float64) string {
	type kv struct {
		k string
		v float64
	}
	var list []kv
	total := 0.0
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			list = append(list, kv{k, d})
			total += d
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].v > list[j].v })
	parts := make([]string, 0, len(list))
	for _, e := range list {
		parts = append(parts, fmt.Sprintf("%s %.0f", e.k, e.v))
	}
	return fmt.Sprintf("%.0f: %s", total, strings.Join(parts, ", "))
}
