// Package patches holds the patches the Makefile applies to the pinned
// cluster-autoscaler module before building it (*.patch, applied in name
// order with `git apply`, so with no fuzz). It has no code: its test checks
// that the patches still apply exactly to the pinned version in the module
// cache and touch only the files they are allowed to.
package patches
