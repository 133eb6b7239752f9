package credstore

// ClusterConfigs returns where cloud and cluster tools keep the
// configuration that says which account, project, subscription or
// cluster a command acts on: one entry per tool and place, each with the
// tool's documentation, in Store's form (Paths places an entry for a
// caller: an "$XDG_…" entry where the caller's variable puts it and at
// its default, a "$VAR" entry wherever the tool's variable points). The
// names below these places ("~/.kube/prod/config", a KUBECONFIG of
// "/srv/kube/prd.yaml") are matched against the production markers
// (policy's [review] production); a name elsewhere ("/work/prod/src")
// says nothing about where a command acts. Many of them are credential
// stores too (Stores), denied unless allow_secrets drops them. The
// result is a fresh slice.
func ClusterConfigs() []Store {
	return []Store{
		{"~/.kube", "kubectl", "https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/"},
		{"$KUBECONFIG", "kubectl", "https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/"},
		{"~/.aws", "AWS CLI", "https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-files.html"},
		{"$AWS_CONFIG_FILE", "AWS CLI", "https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-envvars.html"},
		{"$AWS_SHARED_CREDENTIALS_FILE", "AWS CLI", "https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-envvars.html"},
		{"~/.config/gcloud", "Google Cloud CLI (fixed under the home)", "https://cloud.google.com/sdk/docs/configurations"},
		{"$CLOUDSDK_CONFIG", "Google Cloud CLI", "https://cloud.google.com/sdk/docs/configurations"},
		{"~/.azure", "Azure CLI", "https://learn.microsoft.com/en-us/cli/azure/azure-cli-configuration"},
		{"$AZURE_CONFIG_DIR", "Azure CLI", "https://learn.microsoft.com/en-us/cli/azure/azure-cli-configuration"},
		{"~/.oci", "Oracle Cloud CLI", "https://docs.oracle.com/en-us/iaas/Content/API/Concepts/sdkconfig.htm"},
		{"~/.bluemix", "IBM Cloud CLI", "https://cloud.ibm.com/docs/cli?topic=cli-ibmcloud_env_var"},
		{"~/.aliyun", "Alibaba Cloud CLI", "https://github.com/aliyun/aliyun-cli#configure"},
		{"$XDG_CONFIG_HOME/doctl", "DigitalOcean doctl", "https://docs.digitalocean.com/reference/doctl/how-to/install/"},
		{"$XDG_CONFIG_HOME/linode-cli", "Linode CLI", "https://github.com/linode/linode-cli#configuration"},
		{"$XDG_CONFIG_HOME/hcloud", "Hetzner hcloud", "https://github.com/hetznercloud/cli/blob/main/docs/tutorials/setup-hcloud-cli.md"},
		{"$XDG_CONFIG_HOME/scw", "Scaleway CLI", "https://github.com/scaleway/scaleway-sdk-go/blob/master/scw/README.md"},
		{"$XDG_CONFIG_HOME/exoscale", "Exoscale CLI", "https://community.exoscale.com/documentation/tools/exoscale-command-line-interface/"},
		{"$XDG_CONFIG_HOME/openstack", "OpenStack clouds.yaml", "https://docs.openstack.org/openstacksdk/latest/user/config/configuration.html"},
		{"~/.terraform.d", "Terraform", "https://developer.hashicorp.com/terraform/cli/config/config-file"},
		{"$TF_CLI_CONFIG_FILE", "Terraform", "https://developer.hashicorp.com/terraform/cli/config/config-file#locations"},
		{"~/.pulumi", "Pulumi", "https://www.pulumi.com/docs/iac/cli/environment-variables/"},
		{"$PULUMI_HOME", "Pulumi", "https://www.pulumi.com/docs/iac/cli/environment-variables/"},
		{"~/.docker", "Docker CLI (contexts)", "https://docs.docker.com/reference/cli/docker/#configuration-files"},
		{"$DOCKER_CONFIG", "Docker CLI (contexts)", "https://docs.docker.com/reference/cli/docker/#configuration-files"},
		{"$XDG_CONFIG_HOME/helm", "Helm", "https://helm.sh/docs/helm/helm/"},
		{"$HELM_CONFIG_HOME", "Helm", "https://helm.sh/docs/helm/helm/"},
		{"~/.minikube", "minikube", "https://minikube.sigs.k8s.io/docs/handbook/config/"},
		{"$MINIKUBE_HOME", "minikube", "https://minikube.sigs.k8s.io/docs/handbook/config/"},
		{"~/.talos", "talosctl", "https://www.talos.dev/latest/reference/cli/"},
		{"$TALOSCONFIG", "talosctl", "https://www.talos.dev/latest/reference/cli/"},
		{"$XDG_CONFIG_HOME/argocd", "Argo CD CLI", "https://argo-cd.readthedocs.io/en/stable/user-guide/commands/argocd_login/"},
		{"~/.tsh", "Teleport tsh", "https://goteleport.com/docs/reference/cli/tsh/"},
		{"~/.cf", "Cloud Foundry CLI", "https://docs.cloudfoundry.org/cf-cli/cf7-config.html"},
	}
}
