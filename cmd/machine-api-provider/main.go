// Command machine-api-provider is the one binary of the OpenShift Machine API
// provider for cloudscale.ch and Exoscale. Its subcommands run the parts:
// the cloud emulators now; the manager and the deployer as they land.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/appuio/machine-api-provider/pkg/userdata"
)

func main() {
	// Started as the user data sandbox, the binary evaluates one template
	// and exits here (pkg/userdata).
	userdata.Main()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "machine-api-provider",
		Short:         "OpenShift Machine API provider for cloudscale.ch and Exoscale",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(emulatorCommand(), managerCommand(), deployerCommand(), demoCommand(), adoptCommand(), installManifestsCommand())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
