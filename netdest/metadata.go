package netdest

import "net/netip"

// MetadataEndpoint is one cloud instance-metadata or host-agent
// endpoint: where a virtual machine, container or pod fetches its
// credentials (and where Azure's VM agent reports to its host). Whatever
// names one is refused always: no rule, reviewer or person opens it.
type MetadataEndpoint struct {
	// Prefix is the endpoint's address (a /32 or /128) or range; invalid
	// for a name.
	Prefix netip.Prefix
	// Name is the endpoint's host name in normal form (lowercase ASCII,
	// no trailing dot); "" for an address.
	Name string
	// Provider is whose endpoint it is ("AWS", "Azure").
	Provider string
	// Service says what it serves ("EC2 instance metadata (IMDS)").
	Service string
	// Source is the provider's documentation (or, where noted, the
	// provider's own code or cloud-init's datasource) that names it.
	Source string
}

// cloudInit is cloud-init's datasources directory: each datasource names
// its provider's metadata address; used where the provider's own pages
// do not give it.
const cloudInit = "https://github.com/canonical/cloud-init/blob/main/cloudinit/sources/"

// metadataTable is every endpoint, one row per provider and address, so
// each row has its source. Many providers share 169.254.169.254; a row
// per provider says who documents it (Vultr, UpCloud, Exoscale,
// Brightbox, Huawei Cloud and NWCS use it too, per their cloud-init
// datasources, and need no row of their own).
//
// Left out, each already refused unless a rule names its address (it is
// in a special-purpose range), or refused where it resolves to one:
//   - fd20:ce::254, Google's metadata server over IPv6: no Google page
//     or Google code found that names it. The address is unique local
//     (ULA).
//   - 192.0.0.192, said to be Oracle Cloud Classic's: not in Oracle's
//     documentation found (192.0.0.0/24, IETF protocol assignments).
//   - 169.254.0.23, behind metadata.tencentyun.com, and GKE's metadata
//     server on 169.254.169.252:988: not in the providers' pages found
//     (link-local; the Tencent name is a row).
//   - Azure Arc's Hybrid IMDS on localhost:40342 (learn.microsoft.com,
//     azure-arc/servers/agent-overview): loopback, reached only under a
//     rule naming 127.0.0.1 on that port; an entry for one loopback port
//     would also refuse whatever host server the kernel gives that
//     ephemeral port.
func metadataTable() []MetadataEndpoint {
	const (
		awsIMDS   = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html"
		eksPodID  = "https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html"
		ibm       = "https://cloud.ibm.com/apidocs/vpc-metadata"
		akamai    = "https://techdocs.akamai.com/cloud-computing/docs/metadata-service-api"
		openstack = "https://specs.openstack.org/openstack/neutron-specs/specs/ussuri/metadata-add-ipv6-support.html"
		scaleway  = "https://www.scaleway.com/en/developers/api/instance/user-data"
		hetzner   = cloudInit + "DataSourceHetzner.py"
	)
	addr := func(a, provider, service, source string) MetadataEndpoint {
		ip := netip.MustParseAddr(a)
		return MetadataEndpoint{Prefix: netip.PrefixFrom(ip, ip.BitLen()), Provider: provider, Service: service, Source: source}
	}
	name := func(n, provider, service, source string) MetadataEndpoint {
		return MetadataEndpoint{Name: n, Provider: provider, Service: service, Source: source}
	}
	return []MetadataEndpoint{
		addr("169.254.169.254", "AWS", "EC2 instance metadata (IMDS)", awsIMDS),
		addr("fd00:ec2::254", "AWS", "EC2 instance metadata (IMDS) over IPv6", awsIMDS),
		addr("169.254.170.2", "AWS", "ECS task metadata and task role credentials",
			"https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-iam-roles.html"),
		addr("169.254.170.23", "AWS", "EKS Pod Identity Agent", eksPodID),
		addr("fd00:ec2::23", "AWS", "EKS Pod Identity Agent over IPv6", eksPodID),
		addr("169.254.169.254", "Azure", "Instance Metadata Service (IMDS), managed identity tokens",
			"https://learn.microsoft.com/en-us/azure/virtual-machines/instance-metadata-service"),
		addr("168.63.129.16", "Azure", "WireServer, the VM agent's channel to its host (ports 80 and 32526)",
			"https://learn.microsoft.com/en-us/azure/virtual-network/what-is-ip-address-168-63-129-16"),
		name("metadata.google.internal", "Google Cloud", "metadata server",
			"https://cloud.google.com/compute/docs/storing-retrieving-metadata"),
		// The short name resolves through the VM's search domain
		// (google.internal), as Google's client library notes.
		name("metadata", "Google Cloud", "metadata server",
			"https://github.com/googleapis/google-cloud-go/blob/main/compute/metadata/metadata.go"),
		addr("169.254.169.254", "Google Cloud", "metadata server",
			"https://github.com/GoogleCloudPlatform/guest-agent/blob/main/metadata/metadata.go"),
		// Kept from the list before it had sources: no Google page was
		// found for it, but SSRF guards everywhere refuse it as Google's
		// metadata name, and refusing a name that serves nothing else
		// costs nothing. Fail closed.
		name("metadata.goog", "Google Cloud", "metadata server (unconfirmed name)",
			"https://cloud.google.com/compute/docs/metadata/overview"),
		addr("169.254.169.254", "Oracle Cloud", "instance metadata service (IMDS)",
			"https://docs.oracle.com/en-us/iaas/Content/Compute/Tasks/gettingmetadata.htm"),
		addr("fd00:c1::a9fe:a9fe", "Oracle Cloud", "instance metadata service (IMDS) over IPv6", cloudInit+"DataSourceOracle.py"),
		addr("100.100.100.200", "Alibaba Cloud", "ECS instance metadata",
			"https://www.alibabacloud.com/help/en/ecs/user-guide/view-instance-metadata"),
		name("metadata.tencentyun.com", "Tencent Cloud", "CVM instance metadata",
			"https://www.tencentcloud.com/document/product/213/32487"),
		addr("169.254.169.254", "IBM Cloud", "VPC instance metadata and identity tokens", ibm),
		name("api.metadata.cloud.ibm.com", "IBM Cloud", "VPC instance metadata and identity tokens", ibm),
		addr("169.254.169.254", "DigitalOcean", "Droplet metadata",
			"https://docs.digitalocean.com/products/droplets/how-to/access-metadata"),
		addr("169.254.169.254", "Akamai (Linode)", "metadata service", akamai),
		addr("fd00:a9fe:a9fe::1", "Akamai (Linode)", "metadata service over IPv6", akamai),
		addr("169.254.169.254", "Hetzner Cloud", "server metadata", hetzner),
		addr("fe80::a9fe:a9fe", "Hetzner Cloud", "server metadata over IPv6", hetzner),
		addr("169.254.169.254", "OpenStack", "Nova metadata service", openstack),
		addr("fe80::a9fe:a9fe", "OpenStack", "Nova metadata service over IPv6", openstack),
		addr("169.254.42.42", "Scaleway", "instance metadata", scaleway),
		addr("fd00:42::42", "Scaleway", "instance metadata over IPv6", scaleway),
		addr("100.96.0.96", "BytePlus (Volcengine)", "ECS instance metadata",
			"https://docs.byteplus.com/en/docs/ecs/Viewing-instance-metadata"),
		name("global.cloudinit.sdns.ksyun.com", "Kingsoft Cloud", "instance metadata",
			"https://endocs.ksyun.com/documents/7200"),
	}
}

// MetadataEndpoints returns every metadata endpoint, in table order.
func MetadataEndpoints() []MetadataEndpoint { return metadataTable() }

// Metadata returns the metadata endpoints destination d names, by its
// name or its address (see MetadataAddr), or nil. d is normalised
// (ParseHost), so every spelling of a name or an address (case, a
// trailing dot, IDNA, inet_aton forms, IPv4-mapped IPv6) is matched.
func Metadata(d Dest) []MetadataEndpoint {
	if d.IsIP() {
		return MetadataAddr(d.Addr)
	}
	var out []MetadataEndpoint
	for _, e := range metadataTable() {
		if e.Name != "" && e.Name == d.Host {
			out = append(out, e)
		}
	}
	return out
}

// MetadataAddr returns the metadata endpoints at address a, or nil: a
// itself with any zone dropped and unmapped, and every IPv4 address an
// IPv6 address embeds (IPv4-compatible, NAT64, 6to4), as Special
// classifies them, since that is where a translator delivers it.
func MetadataAddr(a netip.Addr) []MetadataEndpoint {
	if !a.IsValid() {
		return nil
	}
	a = a.WithZone("").Unmap()
	cands := []netip.Addr{a}
	if _, v4s := embeddings(a); len(v4s) > 0 {
		cands = append(cands, v4s...)
	}
	var out []MetadataEndpoint
	for _, e := range metadataTable() {
		if !e.Prefix.IsValid() {
			continue
		}
		for _, c := range cands {
			if e.Prefix.Contains(c) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}
