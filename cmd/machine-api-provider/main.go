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

// version is the release the binary was built for, and releaseImage that
// release's image by digest (make release sets both): install-manifests
// installs the image of its own release, whose config/ it embeds.
var (
	version      = "dev"
	releaseImage = ""
)

func main() {
	// Started as the user data sandbox, the binary evaluates one template
	// and exits here (pkg/userdata).
	userdata.Main()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := rootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// rootCommand is the binary's command.
func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "machine-api-provider",
		Short:         "OpenShift Machine API provider for cloudscale.ch and Exoscale",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// A command with log flags installs its own logger, and demo
		// logs into its log file: this is for the others.
		PersistentPreRunE: defaultLogger,
	}
	root.AddCommand(subcommands()...)
	return root
}

// subcommands are the binary's commands (the docs test reads their flags).
func subcommands() []*cobra.Command {
	return []*cobra.Command{emulatorCommand(), managerCommand(), webhookCommand(), deployerCommand(), demoCommand(),
		adoptCommand(), installManifestsCommand(), switchFromAppuioCommand(), uninstallCommand(), imagesCommand()}
}
