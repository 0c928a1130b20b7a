package main

import (
	"flag"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// maxVerbosity caps the verbosity of every logger of the binary, whatever
// --zap-log-level says. From V(6) up the Kubernetes client logs its
// requests, and from V(8) their bodies, hex dumps and curl commands: the
// Secrets the provider reads (API tokens, user data) would be in the log.
// The client logs through the logger it finds in the request's context or
// klog's global one, both of which are this one.
const maxVerbosity = 5

// newLogger is the binary's logger from zap's flags, with the verbosity cap.
func newLogger(o *zap.Options) logr.Logger {
	return logr.New(capVerbosity(zap.New(zap.UseFlagOptions(o)).GetSink(), maxVerbosity))
}

// bindLogFlags hands zap's Go flags (--zap-log-level, ...) to cmd, says in
// their help that the verbosity is capped, and makes the logger they
// configure the command's (installLogger) before it runs.
func bindLogFlags(cmd *cobra.Command, o *zap.Options) {
	f := cmd.Flags()
	logFlags := flag.NewFlagSet("log", flag.ContinueOnError)
	o.BindFlags(logFlags)
	f.AddGoFlagSet(logFlags)
	if fl := f.Lookup("zap-log-level"); fl != nil {
		fl.Usage += fmt.Sprintf(". Capped at %d: messages of higher levels are dropped, as from 6 up the Kubernetes client would log requests and their bodies, Secrets among them", maxVerbosity)
	}
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		installLogger(cmd, newLogger(o))
		return nil
	}
}

// installLogger makes log the process's logger before a command runs: the
// one controller-runtime's log.FromContext and klog fall back to, and the
// one in the command's context (commandLog). Every command gets one: the
// root's PersistentPreRunE gives a command without log flags zap's
// defaults. Without it, anything of controller-runtime that logs (its
// client, its wait helpers) made controller-runtime print "log.SetLogger(...)
// was never called" with a goroutine stack after 30 s, into the middle of
// the command's output (switch-from-appuio --apply did).
func installLogger(cmd *cobra.Command, log logr.Logger) {
	ctrllog.SetLogger(log)
	klog.SetLogger(log)
	cmd.SetContext(logr.NewContext(cmd.Context(), log))
}

// defaultLogger is the root's PersistentPreRunE, for commands without log
// flags of their own (the emulators).
func defaultLogger(cmd *cobra.Command, _ []string) error {
	installLogger(cmd, newLogger(&zap.Options{}))
	return nil
}

// commandLog is the logger installLogger gave the running command.
func commandLog(cmd *cobra.Command) logr.Logger {
	return logr.FromContextOrDiscard(cmd.Context())
}

// capVerbosity wraps a sink so that nothing above level max is enabled or
// written, for every logger derived from it.
func capVerbosity(s logr.LogSink, max int) logr.LogSink {
	c := cappedSink{sink: s, max: max}
	if d, ok := s.(logr.CallDepthLogSink); ok {
		return cappedDepthSink{cappedSink: c, depth: d}
	}
	return c
}

type cappedSink struct {
	sink logr.LogSink
	max  int
}

// Init passes on the one frame logr.New reports: the wrapped sink was
// initialised for logr's own frame already, and the wrapper adds one more.
func (c cappedSink) Init(info logr.RuntimeInfo) { c.sink.Init(info) }

func (c cappedSink) Enabled(level int) bool { return level <= c.max && c.sink.Enabled(level) }

func (c cappedSink) Info(level int, msg string, kv ...any) {
	if level <= c.max {
		c.sink.Info(level, msg, kv...)
	}
}

func (c cappedSink) Error(err error, msg string, kv ...any) { c.sink.Error(err, msg, kv...) }

func (c cappedSink) WithValues(kv ...any) logr.LogSink {
	return capVerbosity(c.sink.WithValues(kv...), c.max)
}

func (c cappedSink) WithName(name string) logr.LogSink {
	return capVerbosity(c.sink.WithName(name), c.max)
}

type cappedDepthSink struct {
	cappedSink
	depth logr.CallDepthLogSink
}

func (c cappedDepthSink) WithCallDepth(depth int) logr.LogSink {
	return capVerbosity(c.depth.WithCallDepth(depth), c.max)
}
