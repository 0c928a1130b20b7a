package exoscale

import (
	"context"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// gpuModels names the GPU of Exoscale's GPU families, as Exoscale's product
// pages describe them. A family not listed is named as the API names it.
var gpuModels = map[string]string{
	"gpu":           "NVIDIA Tesla P100",
	"gpu2":          "NVIDIA Tesla V100",
	"gpu3":          "NVIDIA A40",
	"gpua30":        "NVIDIA A30",
	"gpu3080ti":     "NVIDIA GeForce RTX 3080 Ti",
	"gpua5000":      "NVIDIA RTX A5000",
	"gpurtx6000pro": "NVIDIA RTX PRO 6000",
	"gpub300":       "NVIDIA B300",
}

// Flavor describes an instance type (family.size or ID) offered in zone,
// from the API's figures: memory comes in bytes.
func (c *Client) Flavor(ctx context.Context, zone, name string) (*cloud.Flavor, error) {
	t, err := c.instanceType(ctx, zone, name)
	if err != nil {
		return nil, err
	}
	f := &cloud.Flavor{
		Name:      typeNameOf(*t),
		VCPUs:     int(t.Cpus),
		MemoryMiB: t.Memory >> 20,
		Arch:      "amd64",
	}
	if t.Gpus > 0 {
		f.GPUs = int(t.Gpus)
		f.GPUType = gpuModels[string(t.Family)]
		if f.GPUType == "" {
			f.GPUType = string(t.Family)
		}
	}
	return f, nil
}
