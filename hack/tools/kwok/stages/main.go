// Command stages writes kwok's own stage definitions, as kwok v0.8.0 ships
// them in its module, into one file for `kwok --config`: the kwok binary
// simulates nothing without them. Nodes become Ready and keep a lease;
// pods become Ready, complete and go away.
package main

import (
	"fmt"
	"os"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: stages <output file>")
		os.Exit(2)
	}
	docs := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, d := range docs {
		docs[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(d), "---"))
	}
	if err := os.WriteFile(os.Args[1], []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
