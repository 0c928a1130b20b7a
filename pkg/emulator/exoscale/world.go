package exoscale

import (
	"sort"
	"time"
)

// world is everything the emulated cloud holds. It is what the state file
// stores, so every field is exported to encoding/json through its tag.
type world struct {
	Seq int64 `json:"seq"`
	// Accounts by Account.Name.
	Accounts map[string]*account `json:"accounts"`
	// NextPublic numbers public addresses handed out, never reused;
	// NextMAC numbers MAC addresses.
	NextPublic int   `json:"next_public"`
	NextMAC    int64 `json:"next_mac"`
}

func newWorld() *world { return &world{Accounts: map[string]*account{}} }

// account is one organization's resources. Instances, private networks,
// templates and operations belong to a zone; security groups, anti-affinity
// groups and SSH keys are global, as on the real cloud.
type account struct {
	Name               string                        `json:"name"`
	Instances          map[string]*instance          `json:"instances"`
	Templates          map[string]*template          `json:"templates"`
	AntiAffinityGroups map[string]*antiAffinityGroup `json:"anti_affinity_groups"`
	SecurityGroups     map[string]*securityGroup     `json:"security_groups"`
	PrivateNetworks    map[string]*privateNetwork    `json:"private_networks"`
	SSHKeys            map[string]*sshKey            `json:"ssh_keys"`
	Operations         map[string]*operation         `json:"operations"`
	Pools              map[string]*instancePool      `json:"instance_pools"`
}

func newAccount(name string) *account {
	a := &account{Name: name}
	a.fill()
	return a
}

// fill makes the account's maps, which a state file may lack.
func (a *account) fill() {
	if a.Instances == nil {
		a.Instances = map[string]*instance{}
	}
	if a.Templates == nil {
		a.Templates = map[string]*template{}
	}
	if a.AntiAffinityGroups == nil {
		a.AntiAffinityGroups = map[string]*antiAffinityGroup{}
	}
	if a.SecurityGroups == nil {
		a.SecurityGroups = map[string]*securityGroup{}
	}
	if a.PrivateNetworks == nil {
		a.PrivateNetworks = map[string]*privateNetwork{}
	}
	if a.SSHKeys == nil {
		a.SSHKeys = map[string]*sshKey{}
	}
	if a.Operations == nil {
		a.Operations = map[string]*operation{}
	}
	if a.Pools == nil {
		a.Pools = map[string]*instancePool{}
	}
}

// meta is what every resource has.
type meta struct {
	ID        string    `json:"id"`
	Seq       int64     `json:"seq"`
	CreatedAt time.Time `json:"created_at"`
}

func (m *meta) base() *meta { return m }

type resource interface{ base() *meta }

// transition is an instance state change under way: the instance shows its
// interim state until At, then To ("" for gone). Op is the operation that
// follows it: when that operation is doomed, the change is undone instead,
// back to From.
type transition struct {
	To   string    `json:"to"`
	From string    `json:"from"`
	At   time.Time `json:"at"`
	Op   string    `json:"op"`
}

type instance struct {
	meta
	Zone               string            `json:"zone"`
	Name               string            `json:"name"`
	Type               string            `json:"type"`
	Template           string            `json:"template"`
	DiskSize           int64             `json:"disk_size"`
	State              string            `json:"state"`
	Pending            *transition       `json:"pending,omitempty"`
	Labels             map[string]string `json:"labels"`
	PublicIPAssignment string            `json:"public_ip_assignment"`
	PublicIPv4         string            `json:"public_ipv4,omitempty"`
	PublicIPv6         string            `json:"public_ipv6,omitempty"`
	MAC                string            `json:"mac"`
	SecurityGroups     []string          `json:"security_groups"`
	AntiAffinityGroups []string          `json:"anti_affinity_groups"`
	SSHKey             string            `json:"ssh_key,omitempty"`
	SSHKeys            []string          `json:"ssh_keys"`
	UserData           string            `json:"user_data,omitempty"`
	DeployTarget       string            `json:"deploy_target,omitempty"`
	NICs               []nic             `json:"nics"`
	SecureBoot         bool              `json:"secure_boot,omitempty"`
	TPM                bool              `json:"tpm,omitempty"`
	AppSnapshots       bool              `json:"app_consistent_snapshots,omitempty"`
	// Manager is the instance pool that made the instance and owns it ("" for
	// none).
	Manager string `json:"manager,omitempty"`
}

// nic is an instance's interface on a private network.
type nic struct {
	Network string `json:"network"`
	MAC     string `json:"mac"`
}

type template struct {
	meta
	Zone            string `json:"zone"`
	Name            string `json:"name"`
	Description     string `json:"description,omitempty"`
	URL             string `json:"url"`
	Checksum        string `json:"checksum"`
	DefaultUser     string `json:"default_user,omitempty"`
	BootMode        string `json:"boot_mode"`
	Size            int64  `json:"size"`
	SSHKeyEnabled   bool   `json:"ssh_key_enabled"`
	PasswordEnabled bool   `json:"password_enabled"`
	Build           string `json:"build,omitempty"`
	Version         string `json:"version,omitempty"`
	Maintainer      string `json:"maintainer,omitempty"`
	AppSnapshots    bool   `json:"app_consistent_snapshots,omitempty"`
}

type antiAffinityGroup struct {
	meta
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

type securityGroup struct {
	meta
	Name            string   `json:"name"`
	Description     string   `json:"description,omitempty"`
	Rules           []sgRule `json:"rules"`
	ExternalSources []string `json:"external_sources"`
}

type sgRule struct {
	ID            string `json:"id"`
	Description   string `json:"description,omitempty"`
	FlowDirection string `json:"flow_direction"`
	Protocol      string `json:"protocol"`
	Network       string `json:"network,omitempty"`
	// Group is the security group allowed, by ID; Public names a public
	// security group instead.
	Group     string `json:"group,omitempty"`
	Public    string `json:"public,omitempty"`
	StartPort int64  `json:"start_port,omitempty"`
	EndPort   int64  `json:"end_port,omitempty"`
	ICMPType  *int64 `json:"icmp_type,omitempty"`
	ICMPCode  *int64 `json:"icmp_code,omitempty"`
}

type privateNetwork struct {
	meta
	Zone        string            `json:"zone"`
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Labels      map[string]string `json:"labels"`
	// A managed network (StartIP, EndIP and Netmask set) leases addresses
	// to its instances; Leases maps instance IDs to addresses.
	StartIP string            `json:"start_ip,omitempty"`
	EndIP   string            `json:"end_ip,omitempty"`
	Netmask string            `json:"netmask,omitempty"`
	Options *pnOptions        `json:"options,omitempty"`
	Leases  map[string]string `json:"leases"`
}

type pnOptions struct {
	Routers      []string `json:"routers,omitempty"`
	DNSServers   []string `json:"dns-servers,omitempty"`
	NTPServers   []string `json:"ntp-servers,omitempty"`
	DomainSearch []string `json:"domain-search,omitempty"`
}

type sshKey struct {
	meta
	Name        string `json:"name"`
	PublicKey   string `json:"public_key"`
	Fingerprint string `json:"fingerprint"`
}

// operation is an asynchronous change the account asked for, followed with
// GET /v2/operation/{id}. It is "pending" until DoneAt; Failure, decided
// when it was asked for, makes it end in "failure" and undo its change.
type operation struct {
	meta
	Zone    string `json:"zone"`
	Command string `json:"command"`
	Kind    string `json:"kind"`
	Ref     string `json:"ref"`
	// RefZone is the zone of the resource when it is not Zone (a template
	// copied to another zone).
	RefZone string     `json:"ref_zone,omitempty"`
	State   string     `json:"state"`
	DoneAt  time.Time  `json:"done_at"`
	Failure *opFailure `json:"failure,omitempty"`
	// Fetching holds the operation pending while its file downloads (a
	// template's registration).
	Fetching bool   `json:"fetching,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
}

type opFailure struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// sorted returns the values of m in creation order, as the real API lists them.
// lookup finds the resource the path's id names in m; inZone (nil: every
// resource is the account's) says whether one is visible in the call's zone.
// What is not there, or not there in this zone, is the real API's 404.
func lookup[T resource](c *call, m map[string]T, kind string, inZone func(T) bool) (T, *reply) {
	v, ok := m[c.params["id"]]
	if !ok || (inZone != nil && !inZone(v)) {
		var zero T
		r := notFound(kind, c.params["id"])
		return zero, &r
	}
	return v, nil
}

func sorted[T resource](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].base().Seq < out[j].base().Seq })
	return out
}
