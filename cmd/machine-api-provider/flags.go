package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// byteSize is a flag taking a size as a Kubernetes quantity (256Mi, 1G) or
// a number of bytes.
type byteSize struct{ n *int64 }

func (b *byteSize) String() string {
	if b.n == nil {
		return ""
	}
	return resource.NewQuantity(*b.n, resource.BinarySI).String()
}

func (b *byteSize) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("not a size such as 256Mi: %w", err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return fmt.Errorf("%s is not a positive number of bytes", s)
	}
	*b.n = n
	return nil
}

func (*byteSize) Type() string { return "size" }
