package main

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// loggerAt is the binary's logger as --zap-log-level=level makes it.
func loggerAt(t *testing.T, level string) (*syncBuffer, *zap.Options) {
	t.Helper()
	out := &syncBuffer{}
	o := &zap.Options{DestWriter: out}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--zap-log-level=" + level}); err != nil {
		t.Fatal(err)
	}
	return out, o
}

func TestVerbosityIsCapped(t *testing.T) {
	out, o := loggerAt(t, "10")
	log := newLogger(o)

	log.V(5).Info("level-five")
	log.V(6).Info("level-six")
	log.V(3).V(3).Info("level-three-plus-three")
	log.WithName("n").WithValues("k", "v").V(8).Info("derived-level-eight")
	log.WithCallDepth(1).V(9).Info("depth-level-nine")
	log.Error(nil, "an-error")
	if log.V(6).Enabled() || log.WithName("x").V(10).Enabled() {
		t.Error("a level above the cap is enabled")
	}

	// The Kubernetes client logs bodies at V(8) through the logger in the
	// request's context, or klog's global one: both are this logger.
	ctx := klog.NewContext(context.Background(), log)
	klog.FromContext(ctx).V(8).Info("Response Body", "body", "secret-in-body")
	klog.SetLogger(log)
	defer klog.ClearLogger()
	klog.Background().V(8).Info("Request Body", "body", "secret-in-global")

	got := out.String()
	for _, want := range []string{"level-five", "an-error"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q missing from the log:\n%s", want, got)
		}
	}
	for _, never := range []string{"level-six", "level-three-plus-three", "derived-level-eight", "depth-level-nine", "secret-in-body", "secret-in-global"} {
		if strings.Contains(got, never) {
			t.Errorf("%q logged above the cap:\n%s", never, got)
		}
	}
}

func TestCapKeepsTheCaller(t *testing.T) {
	// A sink that reports its caller, as zap does with AddCaller: the
	// wrapper must not become the caller.
	var got string
	inner := funcr.New(func(_, args string) { got = args }, funcr.Options{LogCaller: funcr.All})
	logr.New(capVerbosity(inner.GetSink(), maxVerbosity)).Info("where")
	if !strings.Contains(got, "logging_test.go") {
		t.Errorf("caller lost: %s", got)
	}
}
