package testenv

import (
	"testing"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric reads the series of name in controller-runtime's registry (the
// one the manager serves on /metrics) whose labels include every label
// given, as a scrape of the process would: how many there are, and the sum
// of their values (counters and gauges).
func Metric(t testing.TB, name string, labels map[string]string) (sum float64, series int) {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			match := true
			for k, v := range labels {
				match = match && have[k] == v
			}
			if match {
				series++
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum, series
}

// Counter is the sum of the counter name's series that carry labels.
func Counter(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	sum, _ := Metric(t, name, labels)
	return sum
}
