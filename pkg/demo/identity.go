package demo

import (
	"context"
	"time"

	"github.com/appuio/machine-api-provider/pkg/clusterid"
)

// DeclaredIDs is the identity the Infrastructure gives, as the deployer
// reads it for the manager's flags: the legacy cluster IDs an admin
// declared (clusterid.LegacyAnnotation). The tests' ownership audit holds
// writes to these IDs as the cluster's (test/ownaudit, Options.AlsoOwns).
func (e *Env) DeclaredIDs() (clusterid.IDs, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	return clusterid.Read(ctx, e.Client)
}
