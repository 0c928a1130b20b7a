package exoscale

// routes is the emulated part of the API, in the vendor's paths, each with
// its operationId (what IAM policies name). Anything else is a JSON 404 (or
// 405 for a known path and another method).
func (e *Emulator) routes() *router {
	r := &router{}
	r.add("GET", "/v2/zone", "list-zones", e.listZones).public = true
	r.add("GET", "/v2/operation/{id}", "get-operation", e.getOperation)

	r.add("GET", "/v2/instance", "list-instances", e.listInstances)
	r.add("POST", "/v2/instance", "create-instance", e.createInstance)
	r.add("GET", "/v2/instance/{id}", "get-instance", e.getInstance)
	r.add("PUT", "/v2/instance/{id}", "update-instance", e.updateInstance)
	r.add("DELETE", "/v2/instance/{id}", "delete-instance", e.deleteInstance)
	r.add("DELETE", "/v2/instance/{id}/{field}", "reset-instance-field", e.resetInstanceField)
	r.add("PUT", "/v2/instance/{id}:start", "start-instance", e.startInstance)
	r.add("PUT", "/v2/instance/{id}:stop", "stop-instance", e.stopInstance)
	r.add("PUT", "/v2/instance/{id}:reboot", "reboot-instance", e.rebootInstance)
	r.add("PUT", "/v2/instance/{id}:scale", "scale-instance", e.scaleInstance)
	r.add("PUT", "/v2/instance/{id}:resize-disk", "resize-instance-disk", e.resizeInstanceDisk)

	r.add("GET", "/v2/instance-pool", "list-instance-pools", e.listInstancePools)
	r.add("POST", "/v2/instance-pool", "create-instance-pool", e.createInstancePool)
	r.add("GET", "/v2/instance-pool/{id}", "get-instance-pool", e.getInstancePool)
	r.add("DELETE", "/v2/instance-pool/{id}", "delete-instance-pool", e.deleteInstancePool)
	r.add("PUT", "/v2/instance-pool/{id}:scale", "scale-instance-pool", e.scaleInstancePool)
	r.add("PUT", "/v2/instance-pool/{id}:evict", "evict-instance-pool-members", e.evictInstancePoolMembers)

	r.add("GET", "/v2/instance-type", "list-instance-types", e.listInstanceTypes)
	r.add("GET", "/v2/instance-type/{id}", "get-instance-type", e.getInstanceType)

	r.add("GET", "/v2/template", "list-templates", e.listTemplates)
	r.add("POST", "/v2/template", "register-template", e.registerTemplate)
	r.add("GET", "/v2/template/{id}", "get-template", e.getTemplate)
	r.add("PUT", "/v2/template/{id}", "update-template", e.updateTemplate)
	r.add("POST", "/v2/template/{id}", "copy-template", e.copyTemplate)
	r.add("DELETE", "/v2/template/{id}", "delete-template", e.deleteTemplate)

	r.add("GET", "/v2/anti-affinity-group", "list-anti-affinity-groups", e.listAntiAffinityGroups)
	r.add("POST", "/v2/anti-affinity-group", "create-anti-affinity-group", e.createAntiAffinityGroup)
	r.add("GET", "/v2/anti-affinity-group/{id}", "get-anti-affinity-group", e.getAntiAffinityGroup)
	r.add("DELETE", "/v2/anti-affinity-group/{id}", "delete-anti-affinity-group", e.deleteAntiAffinityGroup)

	r.add("GET", "/v2/security-group", "list-security-groups", e.listSecurityGroups)
	r.add("POST", "/v2/security-group", "create-security-group", e.createSecurityGroup)
	r.add("GET", "/v2/security-group/{id}", "get-security-group", e.getSecurityGroup)
	r.add("DELETE", "/v2/security-group/{id}", "delete-security-group", e.deleteSecurityGroup)
	r.add("POST", "/v2/security-group/{id}/rules", "add-rule-to-security-group", e.addSecurityGroupRule)
	r.add("DELETE", "/v2/security-group/{id}/rules/{rule-id}", "delete-rule-from-security-group", e.deleteSecurityGroupRule)
	r.add("PUT", "/v2/security-group/{id}:attach", "attach-instance-to-security-group", e.attachSecurityGroup)
	r.add("PUT", "/v2/security-group/{id}:detach", "detach-instance-from-security-group", e.detachSecurityGroup)
	r.add("PUT", "/v2/security-group/{id}:add-source", "add-external-source-to-security-group", e.addSecurityGroupSource)
	r.add("PUT", "/v2/security-group/{id}:remove-source", "remove-external-source-from-security-group", e.removeSecurityGroupSource)

	r.add("GET", "/v2/private-network", "list-private-networks", e.listPrivateNetworks)
	r.add("POST", "/v2/private-network", "create-private-network", e.createPrivateNetwork)
	r.add("GET", "/v2/private-network/{id}", "get-private-network", e.getPrivateNetwork)
	r.add("PUT", "/v2/private-network/{id}", "update-private-network", e.updatePrivateNetwork)
	r.add("DELETE", "/v2/private-network/{id}", "delete-private-network", e.deletePrivateNetwork)
	r.add("DELETE", "/v2/private-network/{id}/{field}", "reset-private-network-field", e.resetPrivateNetworkField)
	r.add("PUT", "/v2/private-network/{id}:attach", "attach-instance-to-private-network", e.attachPrivateNetwork)
	r.add("PUT", "/v2/private-network/{id}:detach", "detach-instance-from-private-network", e.detachPrivateNetwork)
	r.add("PUT", "/v2/private-network/{id}:update-ip", "update-private-network-instance-ip", e.updatePrivateNetworkIP)

	r.add("GET", "/v2/ssh-key", "list-ssh-keys", e.listSSHKeys)
	r.add("POST", "/v2/ssh-key", "register-ssh-key", e.registerSSHKey)
	r.add("GET", "/v2/ssh-key/{name}", "get-ssh-key", e.getSSHKey)
	r.add("DELETE", "/v2/ssh-key/{name}", "delete-ssh-key", e.deleteSSHKey)

	r.add("GET", "/v2/quota", "list-quotas", e.listQuotas)
	r.add("GET", "/v2/quota/{entity}", "get-quota", e.getQuota)

	r.add("GET", "/v2/deploy-target", "list-deploy-targets", e.listDeployTargets)
	r.add("GET", "/v2/deploy-target/{id}", "get-deploy-target", e.getDeployTarget)
	return r
}

func (e *Emulator) listZones(c *call) reply {
	zones := []any{}
	for _, z := range Zones {
		zones = append(zones, map[string]any{"name": z, "api-endpoint": c.endpoint(z)})
	}
	return ok(map[string]any{"zones": zones})
}
