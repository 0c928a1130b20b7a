// Command machine-api-provider is the one binary of the OpenShift Machine API
// provider for cloudscale.ch and Exoscale. Its subcommands run the parts:
// the manager, the admission webhooks, the deployer, the cloud emulators and the demo.
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

// version is the release the binary was built for (make release sets it).
var version = "dev"

func main() {
	// Started as the user data sandbox, the binary evaluates one template
	// and exits here (pkg/userdata).
	userdata.Main()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "machine-api-provider",
		Short:         "OpenShift Machine API provider for cloudscale.ch and Exoscale",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(subcommands()...)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// subcommands are the binary's commands (the docs test reads their flags).
func subcommands() []*cobra.Command {
	return []*cobra.Command{emulatorCommand(), managerCommand(), webhookCommand(), deployerCommand(), demoCommand(),
		adoptCommand(), installManifestsCommand(), switchFromAppuioCommand(), uninstallCommand(), imagesCommand()}
}
