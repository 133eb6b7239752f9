package credstore

import (
	"path/filepath"
	"strings"
)

// Store is one credential store a tool documents.
type Store struct {
	// At is where the store is: "~/..." (fixed under the home),
	// "$XDG_CONFIG_HOME/...", "$XDG_DATA_HOME/...", "$XDG_STATE_HOME/..."
	// or "$XDG_CACHE_HOME/..." (where the caller's variable puts it and
	// at the variable's default, since a program started without it
	// uses that), or "$VAR/..." for a tool's own variable (only where it
	// is set to an absolute path; the store's default place is another
	// entry). A directory stands for everything below it; the last
	// element may be a glob.
	At string
	// Tool names the program that keeps the store.
	Tool string
	// Doc is the tool's documentation of the store.
	Doc string
}

// xdgDefaults are the XDG base directories' defaults under the home
// (XDG Base Directory Specification).
var xdgDefaults = map[string]string{
	"XDG_CONFIG_HOME": ".config",
	"XDG_DATA_HOME":   ".local/share",
	"XDG_STATE_HOME":  ".local/state",
	"XDG_CACHE_HOME":  ".cache",
}

// listVars are variables that hold a list of paths (":"-separated).
var listVars = map[string]bool{"KUBECONFIG": true}

// Dirs are a caller's home and environment, which place the stores.
type Dirs struct {
	// Home is the caller's home directory (absolute, clean).
	Home string
	// Getenv returns the caller's environment variable ("" when unset).
	Getenv func(string) string
}

func (d Dirs) getenv(k string) string {
	if d.Getenv == nil {
		return ""
	}
	return d.Getenv(k)
}

// Paths returns the absolute places of s for d: for an XDG entry both
// where the caller's variable puts it and its default; for a tool
// variable, each absolute path it names. Clean, without duplicates.
func (s Store) Paths(d Dirs) []string {
	head, rest, _ := strings.Cut(s.At, "/")
	var bases []string
	switch {
	case head == "~":
		bases = []string{d.Home}
	case strings.HasPrefix(head, "$"):
		name := head[1:]
		v := d.getenv(name)
		vals := []string{v}
		if listVars[name] {
			vals = filepath.SplitList(v)
		}
		for _, x := range vals {
			if filepath.IsAbs(x) {
				bases = append(bases, filepath.Clean(x))
			}
		}
		if def, ok := xdgDefaults[name]; ok {
			bases = append(bases, filepath.Join(d.Home, def))
		}
	}
	var out []string
	for _, b := range bases {
		p := filepath.Join(b, rest)
		if !contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Default is s spelled at its default place ("~/.config/gh" for
// "$XDG_CONFIG_HOME/gh"), as the policy's allow_secrets names it; ""
// for a store only a tool's variable places.
func (s Store) Default() string {
	head, rest, _ := strings.Cut(s.At, "/")
	switch {
	case head == "~":
		return s.At
	case strings.HasPrefix(head, "$"):
		if def, ok := xdgDefaults[head[1:]]; ok {
			return "~/" + filepath.Join(def, rest)
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Stores returns the documented credential stores, one entry per store
// and place. The result is a fresh slice.
//
// The runtime directory's stores (podman's auth.json, the gpg, ssh and
// password-manager agents' sockets) are not listed: the sandbox masks
// the whole $XDG_RUNTIME_DIR.
func Stores() []Store {
	return []Store{
		// SSH, GnuPG and signing keys.
		{"~/.ssh", "OpenSSH", "https://man.openbsd.org/ssh#FILES"},
		{"~/.gnupg", "GnuPG", "https://www.gnupg.org/documentation/manuals/gnupg/GPG-Configuration.html"},
		{"$GNUPGHOME", "GnuPG", "https://www.gnupg.org/documentation/manuals/gnupg/GPG-Configuration.html"},
		{"$XDG_CONFIG_HOME/sops/age", "sops (age identities)", "https://github.com/getsops/sops#encrypting-using-age"},
		{"$SOPS_AGE_KEY_FILE", "sops (age identities)", "https://github.com/getsops/sops#encrypting-using-age"},
		{"~/.minisign", "minisign", "https://jedisct1.github.io/minisign/"},
		{"~/.ollama/id_ed25519", "Ollama (ollama.com key)", "https://github.com/ollama/ollama/blob/main/docs/faq.md"},
		{"~/.pki", "NSS (client certificate keys)", "https://firefox-source-docs.mozilla.org/security/nss/"},

		// Shell, REPL and client histories: typed passwords, tokens in
		// exported variables and connection strings.
		{"~/.bash_history", "bash", "https://www.gnu.org/software/bash/manual/html_node/Bash-History-Facilities.html"},
		{"$HISTFILE", "bash, zsh, ksh", "https://www.gnu.org/software/bash/manual/html_node/Bash-Variables.html#index-HISTFILE"},
		{"~/.zsh_history", "zsh", "https://zsh.sourceforge.io/Doc/Release/Parameters.html#index-HISTFILE"},
		{"~/.zhistory", "zsh (prezto's former default)", "https://github.com/sorin-ionescu/prezto/blob/master/modules/history/README.md"},
		{"~/.histfile", "zsh (zsh-newuser-install)", "https://zsh.sourceforge.io/Doc/Release/User-Contributions.html#index-zsh_002dnewuser_002dinstall"},
		{"$ZDOTDIR/.zsh_history", "zsh", "https://zsh.sourceforge.io/Doc/Release/Files.html"},
		{"$ZDOTDIR/.zhistory", "zsh", "https://zsh.sourceforge.io/Doc/Release/Files.html"},
		{"$XDG_STATE_HOME/zsh", "zsh (XDG convention)", "https://wiki.archlinux.org/title/XDG_Base_Directory"},
		{"$XDG_STATE_HOME/bash", "bash (XDG convention)", "https://wiki.archlinux.org/title/XDG_Base_Directory"},
		{"$XDG_DATA_HOME/fish/fish_history", "fish", "https://fishshell.com/docs/current/interactive.html#searchable-command-history"},
		{"$XDG_DATA_HOME/fish/*_history", "fish (named sessions)", "https://fishshell.com/docs/current/language.html#envvar-fish_history"},
		{"$XDG_CONFIG_HOME/nushell/history.txt", "nushell", "https://www.nushell.sh/book/configuration.html"},
		{"$XDG_CONFIG_HOME/nushell/history.sqlite3", "nushell", "https://www.nushell.sh/book/configuration.html"},
		{"$XDG_DATA_HOME/xonsh", "xonsh", "https://xon.sh/envvars.html#xonsh-data-dir"},
		{"~/.sh_history", "ksh", "https://www.ibm.com/docs/en/aix/7.2?topic=shell-korn-command-history"},
		{"~/.history", "tcsh", "https://www.mankier.com/1/tcsh#Special_shell_variables-histfile"},
		{"~/.python_history", "Python REPL", "https://docs.python.org/3/using/cmdline.html#envvar-PYTHON_HISTORY"},
		{"$PYTHON_HISTORY", "Python REPL", "https://docs.python.org/3/using/cmdline.html#envvar-PYTHON_HISTORY"},
		{"~/.ipython/profile_default/history.sqlite", "IPython", "https://ipython.readthedocs.io/en/stable/config/options/terminal.html#configtrait-HistoryAccessor.hist_file"},
		{"~/.psql_history", "psql", "https://www.postgresql.org/docs/current/app-psql.html#APP-PSQL-FILES"},
		{"$PSQL_HISTORY", "psql", "https://www.postgresql.org/docs/current/app-psql.html#APP-PSQL-ENVIRONMENT"},
		{"~/.mysql_history", "mysql", "https://dev.mysql.com/doc/refman/8.0/en/mysql-logging.html"},
		{"$MYSQL_HISTFILE", "mysql", "https://dev.mysql.com/doc/refman/8.0/en/mysql-logging.html"},
		{"~/.rediscli_history", "redis-cli", "https://redis.io/docs/latest/develop/tools/cli/"},
		{"$REDISCLI_HISTFILE", "redis-cli", "https://redis.io/docs/latest/develop/tools/cli/"},
		{"~/.dbshell", "mongo shell", "https://www.mongodb.com/docs/v4.4/mongo/#command-history"},
		{"~/.mongodb/mongosh", "mongosh (history and logs)", "https://www.mongodb.com/docs/mongodb-shell/logs/"},
		{"~/.irb_history", "irb", "https://docs.ruby-lang.org/en/master/IRB.html"},
		{"$XDG_DATA_HOME/pry/pry_history", "pry", "https://github.com/pry/pry/wiki/Customization-and-configuration"},
		{"~/.pry_history", "pry", "https://github.com/pry/pry/wiki/Customization-and-configuration"},
		{"~/.lesshst", "less", "https://man7.org/linux/man-pages/man1/less.1.html#ENVIRONMENT_VARIABLES"},
		{"$XDG_STATE_HOME/lesshst", "less", "https://man7.org/linux/man-pages/man1/less.1.html#ENVIRONMENT_VARIABLES"},
		{"$LESSHISTFILE", "less", "https://man7.org/linux/man-pages/man1/less.1.html#ENVIRONMENT_VARIABLES"},
		{"$XDG_STATE_HOME/nvim/shada", "Neovim (registers and command history)", "https://neovim.io/doc/user/starting.html#shada-file-name"},
		{"~/.viminfo", "Vim (registers and command history)", "https://vimhelp.org/starting.txt.html#viminfo-file"},
		{"$XDG_DATA_HOME/atuin", "atuin (history, sync key and session)", "https://docs.atuin.sh/configuration/config/"},
		{"$XDG_CONFIG_HOME/pgcli/history", "pgcli", "https://www.pgcli.com/config"},
		{"~/.mycli-history", "mycli", "https://www.mycli.net/config"},

		// Git and forges.
		{"~/.git-credentials", "git credential-store", "https://git-scm.com/docs/git-credential-store#_files"},
		{"$XDG_CONFIG_HOME/git/credentials", "git credential-store", "https://git-scm.com/docs/git-credential-store#_files"},
		{"~/.git-credential-cache", "git credential-cache", "https://git-scm.com/docs/git-credential-cache"},
		{"$XDG_CACHE_HOME/git/credential", "git credential-cache", "https://git-scm.com/docs/git-credential-cache"},
		{"$XDG_CONFIG_HOME/gh", "GitHub CLI", "https://cli.github.com/manual/gh_help_environment"},
		{"$GH_CONFIG_DIR", "GitHub CLI", "https://cli.github.com/manual/gh_help_environment"},
		{"$XDG_CONFIG_HOME/hub", "hub", "https://hub.github.com/hub.1.html"},
		{"$XDG_CONFIG_HOME/glab-cli", "GitLab CLI", "https://gitlab.com/gitlab-org/cli#configuration"},
		{"$XDG_CONFIG_HOME/tea", "Gitea tea", "https://gitea.com/gitea/tea"},
		{"~/.gcm/store", "Git Credential Manager (plaintext store)", "https://github.com/git-ecosystem/git-credential-manager/blob/main/docs/credstores.md"},

		// Cloud, infrastructure and clusters.
		{"~/.aws", "AWS CLI", "https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-files.html"},
		{"$AWS_SHARED_CREDENTIALS_FILE", "AWS CLI", "https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-envvars.html"},
		{"$AWS_CONFIG_FILE", "AWS CLI", "https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-envvars.html"},
		{"~/.config/gcloud", "Google Cloud CLI (fixed under the home)", "https://cloud.google.com/sdk/docs/configurations"},
		{"$CLOUDSDK_CONFIG", "Google Cloud CLI", "https://cloud.google.com/sdk/docs/configurations"},
		{"$GOOGLE_APPLICATION_CREDENTIALS", "Google Application Default Credentials", "https://cloud.google.com/docs/authentication/application-default-credentials"},
		{"~/.azure", "Azure CLI", "https://learn.microsoft.com/en-us/cli/azure/azure-cli-configuration"},
		{"$AZURE_CONFIG_DIR", "Azure CLI", "https://learn.microsoft.com/en-us/cli/azure/azure-cli-configuration"},
		{"~/.kube", "kubectl", "https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/"},
		{"$KUBECONFIG", "kubectl", "https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/"},
		{"$XDG_CONFIG_HOME/doctl", "DigitalOcean doctl", "https://docs.digitalocean.com/reference/doctl/how-to/install/"},
		{"~/.oci", "Oracle Cloud CLI", "https://docs.oracle.com/en-us/iaas/Content/API/Concepts/sdkconfig.htm"},
		{"~/.bluemix", "IBM Cloud CLI", "https://cloud.ibm.com/docs/cli?topic=cli-ibmcloud_env_var"},
		{"~/.aliyun", "Alibaba Cloud CLI", "https://github.com/aliyun/aliyun-cli#configure"},
		{"$XDG_CONFIG_HOME/linode-cli", "Linode CLI", "https://github.com/linode/linode-cli#configuration"},
		{"$XDG_CONFIG_HOME/hcloud", "Hetzner hcloud", "https://github.com/hetznercloud/cli/blob/main/docs/tutorials/setup-hcloud-cli.md"},
		{"$XDG_CONFIG_HOME/scw", "Scaleway CLI", "https://github.com/scaleway/scaleway-sdk-go/blob/master/scw/README.md"},
		{"$XDG_CONFIG_HOME/exoscale", "Exoscale CLI", "https://community.exoscale.com/documentation/tools/exoscale-command-line-interface/"},
		{"$XDG_CONFIG_HOME/openstack", "OpenStack clouds.yaml and secure.yaml", "https://docs.openstack.org/openstacksdk/latest/user/config/configuration.html"},
		{"~/.terraform.d/credentials.tfrc.json", "Terraform", "https://developer.hashicorp.com/terraform/cli/config/config-file#credentials"},
		{"~/.terraformrc", "Terraform (credentials blocks)", "https://developer.hashicorp.com/terraform/cli/config/config-file#credentials"},
		{"$TF_CLI_CONFIG_FILE", "Terraform (credentials blocks)", "https://developer.hashicorp.com/terraform/cli/config/config-file#locations"},
		{"~/.pulumi/credentials.json", "Pulumi", "https://www.pulumi.com/docs/iac/cli/environment-variables/"},
		{"~/.vault-token", "HashiCorp Vault", "https://developer.hashicorp.com/vault/docs/commands#vault_token"},
		{"~/.cf/config.json", "Cloud Foundry CLI", "https://docs.cloudfoundry.org/cf-cli/cf7-config.html"},
		{"~/.tsh", "Teleport tsh", "https://goteleport.com/docs/reference/cli/tsh/"},
		{"~/.minikube/profiles", "minikube (client keys)", "https://minikube.sigs.k8s.io/docs/handbook/config/"},
		{"~/.minikube/certs", "minikube (CA keys)", "https://minikube.sigs.k8s.io/docs/handbook/config/"},
		{"$XDG_CONFIG_HOME/argocd", "Argo CD CLI", "https://argo-cd.readthedocs.io/en/stable/user-guide/commands/argocd_login/"},
		{"~/.talos", "talosctl", "https://www.talos.dev/latest/reference/cli/"},
		{"$TALOSCONFIG", "talosctl", "https://www.talos.dev/latest/reference/cli/"},
		{"~/.awsvault", "aws-vault (file backend)", "https://github.com/99designs/aws-vault/blob/master/USAGE.md"},
		{"~/.saml2aws", "saml2aws", "https://github.com/Versent/saml2aws#configuring"},
		{"~/.step/secrets", "step CLI", "https://smallstep.com/docs/step-cli/the-step-command/"},

		// Container registries.
		{"~/.docker/config.json", "Docker CLI", "https://docs.docker.com/reference/cli/docker/#configuration-files"},
		{"$DOCKER_CONFIG/config.json", "Docker CLI", "https://docs.docker.com/reference/cli/docker/#configuration-files"},
		{"~/.docker/*.pem", "Docker (TLS client keys)", "https://docs.docker.com/engine/security/protect-access/"},
		{"~/.docker/contexts/tls", "Docker contexts (TLS client keys)", "https://docs.docker.com/engine/manage-resources/contexts/"},
		{"~/.docker/machine/certs", "docker-machine (TLS keys)", "https://github.com/docker/machine"},
		{"$DOCKER_CERT_PATH", "Docker (TLS client keys)", "https://docs.docker.com/reference/cli/docker/#environment-variables"},
		{"~/.dockercfg", "Docker (legacy auths)", "https://github.com/containers/image/blob/main/docs/containers-auth.json.5.md"},
		{"$XDG_CONFIG_HOME/containers/auth.json", "podman, buildah, skopeo", "https://github.com/containers/image/blob/main/docs/containers-auth.json.5.md"},
		{"$REGISTRY_AUTH_FILE", "podman, buildah, skopeo", "https://github.com/containers/image/blob/main/docs/containers-auth.json.5.md"},
		{"$XDG_CONFIG_HOME/helm/registry", "Helm (registry logins)", "https://helm.sh/docs/helm/helm_registry_login/"},
		{"$XDG_CONFIG_HOME/helm/repositories.yaml", "Helm (repository passwords)", "https://helm.sh/docs/helm/helm_repo_add/"},

		// Package registries and build tools.
		{"~/.npmrc", "npm (a copy without credentials is shown)", "https://docs.npmjs.com/cli/configuring-npm/npmrc"},
		{"$NPM_CONFIG_USERCONFIG", "npm (a copy without credentials is shown)", "https://docs.npmjs.com/cli/using-npm/config#userconfig"},
		{"$npm_config_userconfig", "npm (a copy without credentials is shown)", "https://docs.npmjs.com/cli/using-npm/config#environment-variables"},
		{"~/.yarnrc.yml", "Yarn (npmAuthToken)", "https://yarnpkg.com/configuration/yarnrc#npmAuthToken"},
		{"~/.pypirc", "twine, flit", "https://packaging.python.org/en/latest/specifications/pypirc/"},
		{"$XDG_DATA_HOME/uv/credentials", "uv", "https://docs.astral.sh/uv/concepts/authentication/cli/"},
		{"$XDG_CONFIG_HOME/pypoetry/auth.toml", "Poetry", "https://python-poetry.org/docs/repositories/#configuring-credentials"},
		{"$XDG_DATA_HOME/python_keyring", "keyrings.alt file backends", "https://github.com/jaraco/keyrings.alt"},
		{"~/.gem/credentials", "RubyGems", "https://guides.rubygems.org/command-reference/#gem-signin"},
		{"$XDG_DATA_HOME/gem/credentials", "RubyGems", "https://github.com/rubygems/rubygems/blob/master/lib/rubygems/config_file.rb"},
		{"~/.cargo/credentials", "Cargo", "https://doc.rust-lang.org/cargo/reference/config.html#credentials"},
		{"~/.cargo/credentials.toml", "Cargo", "https://doc.rust-lang.org/cargo/reference/config.html#credentials"},
		{"$CARGO_HOME/credentials", "Cargo", "https://doc.rust-lang.org/cargo/reference/config.html#credentials"},
		{"$CARGO_HOME/credentials.toml", "Cargo", "https://doc.rust-lang.org/cargo/reference/config.html#credentials"},
		{"~/.m2/settings.xml", "Maven", "https://maven.apache.org/settings.html#servers"},
		{"~/.m2/settings-security.xml", "Maven", "https://maven.apache.org/guides/mini/guide-encryption.html"},
		{"~/.gradle/gradle.properties", "Gradle (a copy without credentials is shown)", "https://docs.gradle.org/current/userguide/build_environment.html#sec:gradle_configuration_properties"},
		{"$GRADLE_USER_HOME/gradle.properties", "Gradle", "https://docs.gradle.org/current/userguide/build_environment.html#sec:gradle_configuration_properties"},
		{"~/.gradle/gradle.encrypted.properties", "Gradle credentials plugin", "https://github.com/etiennestuder/gradle-credentials-plugin"},
		{"~/.ivy2/.credentials", "sbt, Ivy", "https://www.scala-sbt.org/1.x/docs/Publishing.html#Credentials"},
		{"~/.sbt/.credentials", "sbt", "https://www.scala-sbt.org/1.x/docs/Publishing.html#Credentials"},
		{"$XDG_CONFIG_HOME/composer/auth.json", "Composer", "https://getcomposer.org/doc/articles/authentication-for-private-packages.md"},
		{"~/.composer/auth.json", "Composer", "https://getcomposer.org/doc/articles/authentication-for-private-packages.md"},
		{"$COMPOSER_HOME/auth.json", "Composer", "https://getcomposer.org/doc/03-cli.md#composer-home"},
		{"~/.conan2/credentials.json", "Conan", "https://docs.conan.io/2/reference/config_files/credentials.html"},
		{"~/.jfrog", "JFrog CLI", "https://jfrog.com/help/r/jfrog-cli/environment-variables"},

		// Databases and data platforms.
		{"~/.pgpass", "libpq (psql)", "https://www.postgresql.org/docs/current/libpq-pgpass.html"},
		{"$PGPASSFILE", "libpq (psql)", "https://www.postgresql.org/docs/current/libpq-pgpass.html"},
		{"~/.pg_service.conf", "libpq (may hold passwords)", "https://www.postgresql.org/docs/current/libpq-pgservice.html"},
		{"~/.my.cnf", "MySQL client", "https://dev.mysql.com/doc/refman/8.0/en/option-files.html"},
		{"~/.mylogin.cnf", "mysql_config_editor", "https://dev.mysql.com/doc/refman/8.0/en/mysql-config-editor.html"},
		{"~/.cassandra", "cqlsh", "https://cassandra.apache.org/doc/latest/cassandra/managing/tools/cqlsh.html"},
		{"~/.snowsql/config", "SnowSQL", "https://docs.snowflake.com/en/user-guide/snowsql-config"},
		{"~/.snowflake", "Snowflake CLI", "https://docs.snowflake.com/en/developer-guide/snowflake-cli/connecting/configure-connections"},
		{"~/.dbt/profiles.yml", "dbt", "https://docs.getdbt.com/docs/core/connect-data-platform/profiles.yml"},
		{"~/.databrickscfg", "Databricks CLI", "https://docs.databricks.com/en/dev-tools/auth/config-profiles.html"},
		{"~/.databricks", "Databricks SDK (token cache)", "https://docs.databricks.com/en/dev-tools/auth/index.html"},

		// ML and data services.
		{"$XDG_CACHE_HOME/huggingface/token", "Hugging Face Hub", "https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables#hfhome"},
		{"$XDG_CACHE_HOME/huggingface/stored_tokens", "Hugging Face Hub", "https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables#hfhome"},
		{"$HF_HOME/token", "Hugging Face Hub", "https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables#hfhome"},
		{"$HF_HOME/stored_tokens", "Hugging Face Hub", "https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables#hfhome"},
		{"$HF_TOKEN_PATH", "Hugging Face Hub", "https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables#hftokenpath"},
		{"~/.huggingface/token", "Hugging Face Hub (legacy)", "https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables#hfhome"},
		{"$XDG_CONFIG_HOME/kaggle/kaggle.json", "Kaggle API", "https://github.com/Kaggle/kaggle-api#api-credentials"},
		{"~/.kaggle/kaggle.json", "Kaggle API", "https://github.com/Kaggle/kaggle-api#api-credentials"},
		{"$KAGGLE_CONFIG_DIR/kaggle.json", "Kaggle API", "https://github.com/Kaggle/kaggle-api#api-credentials"},
		{"$XDG_DATA_HOME/jupyter/runtime", "Jupyter (server tokens, kernel keys)", "https://docs.jupyter.org/en/latest/use/jupyter-directories.html#runtime-files"},
		{"~/.netrc", "curl, git, pip, wandb, heroku", "https://everything.curl.dev/usingcurl/netrc.html"},
		{"$NETRC", "Python requests, GNU Inetutils", "https://requests.readthedocs.io/en/latest/user/authentication/#netrc-authentication"},

		// Crypto wallets.
		{"~/.config/solana/id.json", "Solana CLI (plaintext keypair)", "https://docs.solanalabs.com/cli/wallets/file-system"},
		{"~/.ethereum/keystore", "geth", "https://geth.ethereum.org/docs/fundamentals/account-management"},
		{"~/.bitcoin/wallet.dat", "Bitcoin Core", "https://github.com/bitcoin/bitcoin/blob/master/doc/files.md"},
		{"~/.bitcoin/wallets", "Bitcoin Core", "https://github.com/bitcoin/bitcoin/blob/master/doc/files.md"},
		{"~/.electrum/wallets", "Electrum", "https://electrum.readthedocs.io/en/latest/faq.html#where-is-my-wallet-file-located"},
		{"~/.foundry/keystores", "Foundry cast", "https://book.getfoundry.sh/reference/cast/cast-wallet-import"},

		// Password managers, keyrings and wallets.
		{"~/.password-store", "pass", "https://git.zx2c4.com/password-store/about/"},
		{"$PASSWORD_STORE_DIR", "pass", "https://git.zx2c4.com/password-store/about/"},
		{"$XDG_DATA_HOME/gopass", "gopass", "https://github.com/gopasspw/gopass/blob/master/docs/config.md"},
		{"$XDG_DATA_HOME/keyrings", "GNOME Keyring", "https://wiki.gnome.org/Projects/GnomeKeyring"},
		{"$XDG_DATA_HOME/kwalletd", "KWallet", "https://userbase.kde.org/KDE_Wallet_Manager"},
		{"$XDG_CONFIG_HOME/op", "1Password CLI", "https://developer.1password.com/docs/cli/config-directories/"},
		{"~/.op", "1Password CLI", "https://developer.1password.com/docs/cli/config-directories/"},
		{"$XDG_CONFIG_HOME/Bitwarden CLI", "Bitwarden CLI", "https://bitwarden.com/help/cli/#config"},
		{"$XDG_CONFIG_HOME/Bitwarden", "Bitwarden desktop", "https://bitwarden.com/help/data-storage/"},
		{"$XDG_CACHE_HOME/rbw", "rbw", "https://github.com/doy/rbw"},
		{"~/.lpass", "LastPass CLI", "https://github.com/lastpass/lastpass-cli/blob/master/lpass.1.txt"},
		{"$XDG_DATA_HOME/lpass", "LastPass CLI", "https://github.com/lastpass/lastpass-cli/blob/master/lpass.1.txt"},
		{"$XDG_CONFIG_HOME/lpass", "LastPass CLI", "https://github.com/lastpass/lastpass-cli/blob/master/lpass.1.txt"},
		{"~/.vault_pass*", "Ansible Vault password file", "https://docs.ansible.com/ansible/latest/vault_guide/vault_managing_passwords.html"},
		{"~/.vault-pass*", "Ansible Vault password file", "https://docs.ansible.com/ansible/latest/vault_guide/vault_managing_passwords.html"},
		{"$ANSIBLE_VAULT_PASSWORD_FILE", "Ansible Vault password file", "https://docs.ansible.com/ansible/latest/reference_appendices/config.html#default-vault-password-file"},

		// Browsers and mail: cookies, saved logins, passwords.
		{"~/.mozilla", "Firefox (profiles until 146)", "https://support.mozilla.org/en-US/kb/profiles-where-firefox-stores-user-data"},
		{"$XDG_CONFIG_HOME/mozilla", "Firefox (profiles from 147)", "https://bugzilla.mozilla.org/show_bug.cgi?id=259356"},
		{"~/.thunderbird", "Thunderbird", "https://support.mozilla.org/en-US/kb/profiles-where-thunderbird-stores-user-data"},
		{"~/.librewolf", "LibreWolf", "https://librewolf.net/docs/faq/"},
		{"$XDG_CONFIG_HOME/google-chrome", "Google Chrome", "https://chromium.googlesource.com/chromium/src/+/main/docs/user_data_dir.md"},
		{"$XDG_CONFIG_HOME/google-chrome-*", "Google Chrome (other channels)", "https://chromium.googlesource.com/chromium/src/+/main/docs/user_data_dir.md"},
		{"$XDG_CONFIG_HOME/chromium", "Chromium", "https://chromium.googlesource.com/chromium/src/+/main/docs/user_data_dir.md"},
		{"$XDG_CONFIG_HOME/BraveSoftware", "Brave", "https://chromium.googlesource.com/chromium/src/+/main/docs/user_data_dir.md"},
		{"$XDG_CONFIG_HOME/microsoft-edge", "Microsoft Edge", "https://chromium.googlesource.com/chromium/src/+/main/docs/user_data_dir.md"},
		{"$XDG_CONFIG_HOME/microsoft-edge-*", "Microsoft Edge (other channels)", "https://chromium.googlesource.com/chromium/src/+/main/docs/user_data_dir.md"},
		{"$XDG_CONFIG_HOME/vivaldi", "Vivaldi", "https://chromium.googlesource.com/chromium/src/+/main/docs/user_data_dir.md"},
		{"$XDG_CONFIG_HOME/vivaldi-*", "Vivaldi (other channels)", "https://chromium.googlesource.com/chromium/src/+/main/docs/user_data_dir.md"},
		{"$XDG_CONFIG_HOME/opera*", "Opera", "https://chromium.googlesource.com/chromium/src/+/main/docs/user_data_dir.md"},
		{"~/.msmtprc", "msmtp", "https://marlam.de/msmtp/msmtp.html#Configuration-files"},
		{"$XDG_CONFIG_HOME/msmtp", "msmtp", "https://marlam.de/msmtp/msmtp.html#Configuration-files"},
		{"~/.fetchmailrc", "fetchmail", "https://www.fetchmail.info/fetchmail-man.html#FILES"},
		{"~/.authinfo*", "Emacs auth-source", "https://www.gnu.org/software/emacs/manual/html_mono/auth.html"},
		{"$XDG_CONFIG_HOME/aerc/accounts.conf", "aerc", "https://man.sr.ht/~rjarry/aerc/configurations/index.md"},
		{"~/.purple/accounts.xml", "Pidgin", "https://developer.pidgin.im/wiki/Using%20Pidgin#Whereismysettingsstored"},
		{"$XDG_CONFIG_HOME/weechat/sec.conf", "WeeChat", "https://weechat.org/files/doc/weechat/stable/weechat_user.en.html#secured_data"},
		{"$XDG_CONFIG_HOME/rclone", "rclone", "https://rclone.org/docs/#config-config-file"},
		{"$RCLONE_CONFIG", "rclone", "https://rclone.org/docs/#config-config-file"},
		{"~/.s3cfg", "s3cmd", "https://s3tools.org/kb/item14.htm"},
		{"~/.boto", "boto, gsutil", "https://cloud.google.com/storage/docs/boto-gsutil"},
		{"$BOTO_CONFIG", "boto, gsutil", "https://cloud.google.com/storage/docs/boto-gsutil"},
		{"~/.mc/config.json", "MinIO client", "https://min.io/docs/minio/linux/reference/minio-mc.html#configuration"},
		{"$XDG_CONFIG_HOME/Slack", "Slack (session cookies)", "https://slack.com/help/articles/360035635174"},
		{"$XDG_CONFIG_HOME/discord", "Discord (user token)", "https://support.discord.com/hc/en-us/articles/115004307527"},
		{"$XDG_CONFIG_HOME/Signal", "Signal Desktop (database key)", "https://support.signal.org/hc/en-us/articles/360007059752"},
		{"$XDG_DATA_HOME/TelegramDesktop/tdata", "Telegram Desktop (session)", "https://github.com/telegramdesktop/tdesktop"},

		// AI agents: one agent must not read another's keys.
		{"~/.codex/auth.json", "Codex CLI", "https://developers.openai.com/codex/auth"},
		{"$CODEX_HOME/auth.json", "Codex CLI", "https://developers.openai.com/codex/auth"},
		{"~/.claude/.credentials.json", "Claude Code", "https://code.claude.com/docs/en/iam#credential-management"},
		{"~/.claude.json", "Claude Code", "https://code.claude.com/docs/en/settings"},
		{"$CLAUDE_CONFIG_DIR/.credentials.json", "Claude Code", "https://code.claude.com/docs/en/settings#environment-variables"},
		{"~/.pi/agent/auth.json", "pi coding agent", "https://github.com/badlogic/pi-mono/tree/main/packages/coding-agent#api-keys"},
		{"~/.gemini/oauth_creds.json", "Gemini CLI", "https://github.com/google-gemini/gemini-cli/blob/main/docs/get-started/authentication.md"},
		{"~/.gemini/*oauth-tokens*.json", "Gemini CLI (MCP OAuth tokens)", "https://github.com/google-gemini/gemini-cli/blob/main/docs/tools/mcp-server.md"},
		{"~/.gemini/.env", "Gemini CLI", "https://github.com/google-gemini/gemini-cli/blob/main/docs/get-started/authentication.md"},
		{"$XDG_CONFIG_HOME/github-copilot", "GitHub Copilot (editors)", "https://github.com/github/copilot.vim"},
		{"~/.copilot/config.json", "GitHub Copilot CLI", "https://docs.github.com/en/copilot/how-tos/set-up/install-copilot-cli"},
		{"$XDG_DATA_HOME/opencode/auth.json", "opencode", "https://opencode.ai/docs/providers/#credentials"},
		{"$XDG_DATA_HOME/opencode/mcp-auth.json", "opencode", "https://opencode.ai/docs/mcp-servers/"},
		{"$XDG_DATA_HOME/amp/secrets.json", "Amp", "https://ampcode.com/manual"},
		{"$XDG_DATA_HOME/crush", "Crush", "https://github.com/charmbracelet/crush#configuration"},
		{"$XDG_CONFIG_HOME/goose/secrets.yaml", "goose", "https://block.github.io/goose/docs/guides/config-file"},
		{"~/.aider/oauth-keys.env", "aider", "https://aider.chat/docs/config/dotenv.html"},
		{"~/.env", "aider and others load it", "https://aider.chat/docs/config/dotenv.html"},
		{"$XDG_CONFIG_HOME/io.datasette.llm/keys.json", "llm", "https://llm.datasette.io/en/stable/setup.html#saving-and-using-stored-keys"},
		{"~/.qwen/oauth_creds.json", "Qwen Code", "https://github.com/QwenLM/qwen-code"},

		// Other SaaS command-line tools.
		{"$XDG_CONFIG_HOME/netlify", "Netlify CLI", "https://docs.netlify.com/cli/get-started/"},
		{"~/.netlify/config.json", "Netlify CLI (legacy)", "https://docs.netlify.com/cli/get-started/"},
		{"$XDG_DATA_HOME/com.vercel.cli", "Vercel CLI", "https://vercel.com/docs/cli/global-options#global-config"},
		{"~/.vercel", "Vercel CLI (legacy)", "https://vercel.com/docs/cli/global-options#global-config"},
		{"~/.fly/config.yml", "flyctl", "https://fly.io/docs/flyctl/"},
		{"~/.railway/config.json", "Railway CLI", "https://docs.railway.com/guides/cli"},
		{"~/.supabase/access-token", "Supabase CLI", "https://supabase.com/docs/reference/cli/supabase-login"},
		{"$XDG_CONFIG_HOME/configstore/firebase-tools.json", "Firebase CLI", "https://firebase.google.com/docs/cli"},
		{"$XDG_CONFIG_HOME/stripe", "Stripe CLI", "https://docs.stripe.com/cli/login"},
		{"$XDG_CONFIG_HOME/ngrok", "ngrok", "https://ngrok.com/docs/agent/config/"},
		{"~/.ngrok2", "ngrok (v2)", "https://ngrok.com/docs/agent/config/"},
		{"~/.cloudflared", "cloudflared", "https://developers.cloudflare.com/cloudflare-one/connections/connect-networks/do-more-with-tunnels/local-management/tunnel-useful-terms/"},
		{"~/.wrangler/config", "Cloudflare Wrangler", "https://developers.cloudflare.com/workers/wrangler/"},
		{"$XDG_CONFIG_HOME/.wrangler/config", "Cloudflare Wrangler", "https://developers.cloudflare.com/workers/wrangler/"},
		{"~/.sentryclirc", "sentry-cli", "https://docs.sentry.io/cli/configuration/"},
		{"~/.dogrc", "Datadog dogshell", "https://docs.datadoghq.com/developers/guide/dogshell/"},
		{"~/.circleci/cli.yml", "CircleCI CLI", "https://circleci.com/docs/local-cli/"},
		{"~/.travis/config.yml", "Travis CI CLI", "https://github.com/travis-ci/travis.rb#configuration"},
		{"~/.newrelic", "New Relic CLI", "https://github.com/newrelic/newrelic-cli"},
		{"~/.wakatime.cfg", "WakaTime (api_key)", "https://github.com/wakatime/wakatime-cli/blob/develop/USAGE.md#ini-config-file"},
		{"~/.android/adbkey", "Android Debug Bridge (the key devices trust)", "https://developer.android.com/tools/adb#Enabling"},
	}
}
