package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/appuio/machine-api-provider/pkg/bootimages"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/installmanifests"
)

func installManifestsCommand() *cobra.Command {
	var (
		cloudName, dir, image, clusterID       string
		zone, instanceType, infraType, osImage string
		diskSize, workers, infra               int
		network, privateNetwork                string
		securityGroups, sshKeys                []string
		noCredentials, publicInterface         bool
	)
	cmd := &cobra.Command{
		Use:   "install-manifests",
		Short: "Write the files a new cluster's installer needs for workers from MachineSets",
		Long: `Write, into the openshift/ directory of an OpenShift installer directory (after
openshift-install create manifests), the provider's install overlay (RBAC, the deployer, the
admission webhooks: config/overlays/<cloud>, rendered from this binary's copy of config/), the
credentials secret the deployer names (from the environment: CLOUDSCALE_API_TOKEN, or
EXOSCALE_API_KEY and EXOSCALE_API_SECRET), and a worker and an infra MachineSet on the
installer's worker-user-data secret. The cluster's workers then come from MachineSets while it
bootstraps: no Terraform worker step, and cluster-machine-approver approves their certificates
(each Machine's addresses name its Node).

The installer creates the files in no particular order and retries what fails, so nothing
depends on order: the validating webhooks fail open until their backend runs (the actuator
validates every spec itself), and the ServiceMonitor is left out (apply the overlay once the
cluster runs). docs/adopt.md#new-clusters has the whole flow.`,
		Example: `  # a release's tool installs its own release's image, by digest (--image for a mirror);
  # --infra 0: the Terraform modules' load balancers send the routes to Terraform's infra nodes
  openshift-install create manifests --dir install
  CLOUDSCALE_API_TOKEN=... machine-api-provider install-manifests --cloud cloudscale --dir install \
    --zone rma1 --instance-type plus-16-4 --os-image custom:rhcos-4.19 --network <private network UUID> --workers 3 --infra 0
  openshift-install create ignition-configs --dir install`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--dir is required: the installer's directory")
			}
			if image == "" {
				// A build of one's own embeds config/ of its commit: the
				// image must be that commit's too.
				return errors.New("--image is required for a build of your own (a release's tool defaults to its release's image): the image built from the same commit as this binary, such as registry.example.com/appuio/machine-api-provider@sha256:<digest>")
			}
			var c cloud.Cloud
			o := installmanifests.Options{Image: image, ClusterID: clusterID, Workers: workers, Infra: infra}
			spec := map[string]any{"zone": zone}
			switch cloudName {
			case "cloudscale":
				c = cscloud.New(cscloud.Options{DefaultToken: "unused"})
				spec["flavor"], spec["image"], spec["rootVolumeSizeGB"] = instanceType, osImage, diskSize
				if network == "" {
					// cloudscale.ch has no security groups: a node with a
					// public interface only has kubelet and every NodePort
					// on the internet, and cannot reach a private api-int.
					return errors.New("--network is required: the UUID of the cluster's private network (add --public-interface for a public interface as well)")
				}
				interfaces := []any{map[string]any{"type": "Private", "networkUUID": network}}
				if publicInterface {
					interfaces = append([]any{map[string]any{"type": "Public"}}, interfaces...)
				}
				spec["interfaces"] = interfaces
				if !noCredentials {
					token := os.Getenv(cscloud.EnvAPIToken)
					if token == "" {
						return fmt.Errorf("$%s is empty: the deployer's secret cloudscale-token is made with it (or give --no-credentials and create it yourself)", cscloud.EnvAPIToken)
					}
					o.Credentials = map[string]string{"token": token}
				}
			case "exoscale":
				c = exocloud.New(exocloud.Options{DefaultAPIKey: "unused", DefaultAPISecret: "unused"})
				spec["instanceType"], spec["template"], spec["diskSize"] = instanceType, map[string]any{"name": osImage}, diskSize
				if len(securityGroups) == 0 {
					// Without one an instance gets the account's default
					// security group, whatever it lets in.
					return errors.New("--security-group is required: the cluster's security groups, e.g. <cluster>_all_machines and <cluster>_worker")
				}
				var sgs []any
				for _, g := range securityGroups {
					sgs = append(sgs, map[string]any{"name": g})
				}
				if len(sgs) > 0 {
					spec["securityGroups"] = sgs
				}
				if privateNetwork != "" {
					spec["privateNetworks"] = []any{map[string]any{"name": privateNetwork}}
				}
				if len(sshKeys) > 0 {
					spec["sshKeys"] = sshKeys
				}
				if !noCredentials {
					key, secret := os.Getenv(exocloud.EnvAPIKey), os.Getenv(exocloud.EnvAPISecret)
					if key == "" || secret == "" {
						return fmt.Errorf("$%s or $%s is empty: the deployer's secret exoscale-credentials is made with them (or give --no-credentials and create it yourself)", exocloud.EnvAPIKey, exocloud.EnvAPISecret)
					}
					o.Credentials = map[string]string{"api-key": key, "api-secret": secret}
				}
			default:
				return fmt.Errorf("--cloud %q: the clouds are: cloudscale, exoscale", cloudName)
			}
			o.Cloud = c
			if o.ClusterID == "" {
				id, err := installmanifests.InfrastructureName(dir)
				if err != nil {
					return err
				}
				o.ClusterID = id
			}
			o.WorkerSpec = spec
			infraSpec := map[string]any{}
			for k, v := range spec {
				infraSpec[k] = v
			}
			if infraType != "" {
				if cloudName == "cloudscale" {
					infraSpec["flavor"] = infraType
				} else {
					infraSpec["instanceType"] = infraType
				}
			}
			o.InfraSpec = infraSpec
			files, err := installmanifests.Render(o)
			if err != nil {
				return err
			}
			out := filepath.Join(dir, "openshift")
			if err := installmanifests.Write(out, files); err != nil {
				return err
			}
			var names []string
			for _, f := range files {
				names = append(names, f.Name)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d files into %s (cluster %s):\n  %s\n", len(files), out, o.ClusterID, strings.Join(names, "\n  "))
			fmt.Fprint(cmd.OutOrStdout(), bootImageNote(osImage))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cloudName, "cloud", "cloudscale", "the cloud: cloudscale or exoscale")
	f.StringVar(&dir, "dir", "", "the installer's directory (the files go into its openshift/)")
	f.StringVar(&image, "image", releaseImage, "the provider's image (a mirror's: registry.example.com/appuio/machine-api-provider@sha256:...); default: the image of this binary's release, by digest (none for a build of your own)")
	f.StringVar(&clusterID, "cluster-id", "", "the cluster's infrastructure name (default: read from the installer's manifests/cluster-infrastructure-02-config.yml)")
	f.StringVar(&zone, "zone", "", "the zone of the MachineSets (rma1, ch-gva-2)")
	f.StringVar(&instanceType, "instance-type", "", "the workers' flavor (cloudscale.ch) or instance type (Exoscale)")
	f.StringVar(&infraType, "infra-instance-type", "", "the infra nodes' flavor or instance type (default: the workers')")
	f.StringVar(&osImage, "os-image", "", "the RHCOS image (cloudscale.ch: custom:<slug>) or private template name (Exoscale)")
	f.IntVar(&diskSize, "disk-size", 100, "the root disk in GB (cloudscale.ch) or GiB (Exoscale)")
	f.IntVar(&workers, "workers", 3, "replicas of the worker MachineSet")
	f.IntVar(&infra, "infra", 0, "replicas of the infra MachineSet (0: none)")
	f.StringVar(&network, "network", "", "cloudscale.ch, required: the UUID of the cluster's private network")
	f.BoolVar(&publicInterface, "public-interface", false, "cloudscale.ch: a public interface besides the private one (cloudscale.ch has no security groups: kubelet and every NodePort face the internet)")
	f.StringVar(&privateNetwork, "private-network", "", "Exoscale: the name of the cluster's private network")
	f.StringSliceVar(&securityGroups, "security-group", nil, "Exoscale, required: security groups of the nodes, by name (repeatable)")
	f.StringSliceVar(&sshKeys, "ssh-key", nil, "Exoscale: SSH keys of the nodes, by name (repeatable)")
	f.BoolVar(&noCredentials, "no-credentials", false, "write no credentials secret (create it yourself before the deployer starts)")
	return cmd
}

// bootImageNote tells a new cluster what its MachineSets' boot image means
// for the boot-image skew enforcement of OpenShift 4.22 (on platform
// External the machine-config-operator takes the install version for the
// boot images' until MachineConfiguration cluster records them).
func bootImageNote(osImage string) string {
	return fmt.Sprintf(`
Boot images: the MachineSets boot %s, imported by hand. From OpenShift 4.22 the
machine-config-operator holds a cluster back when its boot images are too old for the next
release, and on this platform it cannot see them: let the provider import each release's image
and record it (the deployer's --boot-images-mirror, the ConfigMap's boot-images-record-skew), or record the
image's RHCOS version yourself at each upgrade:
  %s
docs/boot-images.md has both ways.
`, osImage, bootimages.ClearCommand(""))
}
