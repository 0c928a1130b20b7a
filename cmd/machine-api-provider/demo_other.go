//go:build !linux

package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// demoCommand on other systems than Linux: the local control plane chroots
// its pods and gives them network namespaces (pkg/localcluster), which only
// Linux has, so the release's macOS tool (adopt, install-manifests,
// uninstall, switch-from-appuio) carries no demo.
func demoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Run the provider against an emulated cloud on a local control plane (Linux only)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("demo runs the local control plane, which needs Linux: run make demo on a Linux machine")
		},
	}
}
