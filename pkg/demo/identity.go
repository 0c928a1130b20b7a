package demo

import (
	"context"
	"time"

	"github.com/appuio/machine-api-provider/pkg/clusterid"
)

// declaredIDs is the identity the Infrastructure gives, as the deployer
// reads it for the manager's flags: the legacy cluster IDs an admin
// declared (clusterid.LegacyAnnotation).
func (e *Env) declaredIDs() (clusterid.IDs, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	return clusterid.Read(ctx, e.Client)
}
