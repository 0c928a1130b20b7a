package bench

import (
	"testing"
	"time"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
)

// The table's rate-limit floor holds only while the benchmark's idea of
// the manager's default rate limit is the clouds' own.
func TestManagerRateIsTheDefault(t *testing.T) {
	for _, c := range []cloud.Cloud{cscloud.New(cscloud.Options{}), exocloud.New(exocloud.Options{})} {
		if got := c.DefaultRateLimit(); got != defaultManagerRate {
			t.Errorf("%s's default rate limit is %+v; the benchmark assumes %+v", c.Name(), got, defaultManagerRate)
		}
	}
	if managerRateArgs() != nil && managerRate == defaultManagerRate {
		t.Error("flags for the default rate limit")
	}
}

func TestRateFloor(t *testing.T) {
	rl := cloud.RateLimit{QPS: 50, Burst: 100}
	for _, tc := range []struct {
		calls int64
		want  time.Duration
	}{
		{0, 0},
		{100, 0},                 // the burst goes at once
		{2100, 40 * time.Second}, // 1000 creates' look and create, the rest at 50/s
		{3010, 58200 * time.Millisecond},
	} {
		if got := rateFloor(tc.calls, rl); got != tc.want {
			t.Errorf("rateFloor(%d) = %v, want %v", tc.calls, got, tc.want)
		}
	}
	if got := rateFloor(1000, cloud.RateLimit{}); got != 0 {
		t.Errorf("no rate limit: floor %v", got)
	}
	r, err := parseManagerRate("200")
	if err != nil || r != (cloud.RateLimit{QPS: 200, Burst: 400}) {
		t.Errorf("BENCH_CLOUD_API_QPS=200: %+v, %v; want the manager's burst of twice the rate", r, err)
	}
	for _, bad := range []string{"0", "-1", "fast"} {
		if _, err := parseManagerRate(bad); err == nil {
			t.Errorf("BENCH_CLOUD_API_QPS=%q accepted", bad)
		}
	}
}
