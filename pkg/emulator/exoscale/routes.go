package exoscale

// routes is the emulated part of the API, in the vendor's paths. Anything
// else is a JSON 404 (or 405 for a known path and another method).
func (e *Emulator) routes() *router {
	r := &router{}
	r.add("GET", "/v2/zone", e.listZones).public = true
	r.add("GET", "/v2/operation/{id}", e.getOperation)

	r.add("GET", "/v2/instance", e.listInstances)
	r.add("POST", "/v2/instance", e.createInstance)
	r.add("GET", "/v2/instance/{id}", e.getInstance)
	r.add("PUT", "/v2/instance/{id}", e.updateInstance)
	r.add("DELETE", "/v2/instance/{id}", e.deleteInstance)
	r.add("DELETE", "/v2/instance/{id}/{field}", e.resetInstanceField)
	r.add("PUT", "/v2/instance/{id}:start", e.startInstance)
	r.add("PUT", "/v2/instance/{id}:stop", e.stopInstance)
	r.add("PUT", "/v2/instance/{id}:reboot", e.rebootInstance)
	r.add("PUT", "/v2/instance/{id}:scale", e.scaleInstance)
	r.add("PUT", "/v2/instance/{id}:resize-disk", e.resizeInstanceDisk)

	r.add("GET", "/v2/instance-pool", e.listInstancePools)
	r.add("POST", "/v2/instance-pool", e.createInstancePool)
	r.add("GET", "/v2/instance-pool/{id}", e.getInstancePool)
	r.add("DELETE", "/v2/instance-pool/{id}", e.deleteInstancePool)
	r.add("PUT", "/v2/instance-pool/{id}:scale", e.scaleInstancePool)
	r.add("PUT", "/v2/instance-pool/{id}:evict", e.evictInstancePoolMembers)

	r.add("GET", "/v2/instance-type", e.listInstanceTypes)
	r.add("GET", "/v2/instance-type/{id}", e.getInstanceType)

	r.add("GET", "/v2/template", e.listTemplates)
	r.add("POST", "/v2/template", e.registerTemplate)
	r.add("GET", "/v2/template/{id}", e.getTemplate)
	r.add("PUT", "/v2/template/{id}", e.updateTemplate)
	r.add("POST", "/v2/template/{id}", e.copyTemplate)
	r.add("DELETE", "/v2/template/{id}", e.deleteTemplate)

	r.add("GET", "/v2/anti-affinity-group", e.listAntiAffinityGroups)
	r.add("POST", "/v2/anti-affinity-group", e.createAntiAffinityGroup)
	r.add("GET", "/v2/anti-affinity-group/{id}", e.getAntiAffinityGroup)
	r.add("DELETE", "/v2/anti-affinity-group/{id}", e.deleteAntiAffinityGroup)

	r.add("GET", "/v2/security-group", e.listSecurityGroups)
	r.add("POST", "/v2/security-group", e.createSecurityGroup)
	r.add("GET", "/v2/security-group/{id}", e.getSecurityGroup)
	r.add("DELETE", "/v2/security-group/{id}", e.deleteSecurityGroup)
	r.add("POST", "/v2/security-group/{id}/rules", e.addSecurityGroupRule)
	r.add("DELETE", "/v2/security-group/{id}/rules/{rule-id}", e.deleteSecurityGroupRule)
	r.add("PUT", "/v2/security-group/{id}:attach", e.attachSecurityGroup)
	r.add("PUT", "/v2/security-group/{id}:detach", e.detachSecurityGroup)
	r.add("PUT", "/v2/security-group/{id}:add-source", e.addSecurityGroupSource)
	r.add("PUT", "/v2/security-group/{id}:remove-source", e.removeSecurityGroupSource)

	r.add("GET", "/v2/private-network", e.listPrivateNetworks)
	r.add("POST", "/v2/private-network", e.createPrivateNetwork)
	r.add("GET", "/v2/private-network/{id}", e.getPrivateNetwork)
	r.add("PUT", "/v2/private-network/{id}", e.updatePrivateNetwork)
	r.add("DELETE", "/v2/private-network/{id}", e.deletePrivateNetwork)
	r.add("DELETE", "/v2/private-network/{id}/{field}", e.resetPrivateNetworkField)
	r.add("PUT", "/v2/private-network/{id}:attach", e.attachPrivateNetwork)
	r.add("PUT", "/v2/private-network/{id}:detach", e.detachPrivateNetwork)
	r.add("PUT", "/v2/private-network/{id}:update-ip", e.updatePrivateNetworkIP)

	r.add("GET", "/v2/ssh-key", e.listSSHKeys)
	r.add("POST", "/v2/ssh-key", e.registerSSHKey)
	r.add("GET", "/v2/ssh-key/{name}", e.getSSHKey)
	r.add("DELETE", "/v2/ssh-key/{name}", e.deleteSSHKey)

	r.add("GET", "/v2/quota", e.listQuotas)
	r.add("GET", "/v2/quota/{entity}", e.getQuota)

	r.add("GET", "/v2/deploy-target", e.listDeployTargets)
	r.add("GET", "/v2/deploy-target/{id}", e.getDeployTarget)
	return r
}

func (e *Emulator) listZones(c *call) reply {
	zones := []any{}
	for _, z := range Zones {
		zones = append(zones, map[string]any{"name": z, "api-endpoint": c.endpoint(z)})
	}
	return ok(map[string]any{"zones": zones})
}
