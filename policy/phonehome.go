package policy

// EnvSwitch is one documented environment setting that turns off a
// tool's own background connection: an update check or a usage report
// the tool makes by itself, not for what the command asked of it.
type EnvSwitch struct {
	Name, Value string
	// Tool is who reads it; Stops what it turns off.
	Tool, Stops string
	// Source is the tool's documentation of the switch.
	Source string
}

// DefaultPhoneHomeOff lists the switches every run's environment gets
// (unless the caller's own environment sets the name: the caller's value
// wins). Such a check is a connection the command never asked for: with
// npm's defaults `npm install ./x.tgz` succeeds and reports a connect to
// registry.npmjs.org, the host `npm install` needs, so quieting the
// destination would hide real boundaries. A switch stops the check in the
// tool itself and no destination is ever quieted. Only switches the tool
// documents are here, each with its documentation.
func DefaultPhoneHomeOff() []EnvSwitch {
	return []EnvSwitch{
		{"npm_config_update_notifier", "false", "npm", "its update check (npm's update-notifier setting, read from npm_config_*)",
			"https://docs.npmjs.com/cli/v11/using-npm/config#update-notifier"},
		{"npm_config_audit", "false", "npm", "the advisory report it sends alongside install, ci and update (`npm audit` still asks when run)",
			"https://docs.npmjs.com/cli/v11/using-npm/config#audit"},
		{"NO_UPDATE_NOTIFIER", "1", "command-line tools built on the update-notifier package", "their update check",
			"https://github.com/yeoman/update-notifier#user-settings"},
		{"PIP_DISABLE_PIP_VERSION_CHECK", "1", "pip", "its check for a newer pip on PyPI",
			"https://pip.pypa.io/en/stable/cli/pip/#cmdoption-disable-pip-version-check"},
		{"GH_NO_UPDATE_NOTIFIER", "1", "GitHub CLI (gh)", "its update check",
			"https://cli.github.com/manual/gh_help_environment"},
		{"GH_NO_EXTENSION_UPDATE_NOTIFIER", "1", "GitHub CLI (gh)", "its extensions' update check",
			"https://cli.github.com/manual/gh_help_environment"},
		{"DENO_NO_UPDATE_CHECK", "1", "Deno", "its update check",
			"https://docs.deno.com/runtime/reference/env_variables/"},
		{"CHECKPOINT_DISABLE", "1", "HashiCorp tools (terraform, packer, vagrant, ...)", "their upgrade and security bulletin check",
			"https://developer.hashicorp.com/terraform/cli/commands#upgrade-and-security-bulletin-checks"},
		{"HOMEBREW_NO_AUTO_UPDATE", "1", "Homebrew", "its automatic update before install and upgrade",
			"https://docs.brew.sh/Manpage#environment"},
		{"HOMEBREW_NO_ANALYTICS", "1", "Homebrew", "its usage analytics",
			"https://docs.brew.sh/Analytics"},
		{"CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true", "Google Cloud CLI (gcloud)", "its component update check",
			"https://cloud.google.com/sdk/gcloud/reference/topic/configurations"},
		{"CONDA_NOTIFY_OUTDATED_CONDA", "false", "conda", "its check for a newer conda",
			"https://docs.conda.io/projects/conda/en/stable/user-guide/configuration/settings.html"},
		{"POWERSHELL_UPDATECHECK", "Off", "PowerShell", "its update check",
			"https://learn.microsoft.com/powershell/module/microsoft.powershell.core/about/about_update_notifications"},
		{"POWERSHELL_TELEMETRY_OPTOUT", "1", "PowerShell", "its telemetry",
			"https://learn.microsoft.com/powershell/module/microsoft.powershell.core/about/about_telemetry"},
		{"TURBO_NO_UPDATE_NOTIFIER", "1", "Turborepo", "its update check",
			"https://turborepo.com/docs/reference/system-environment-variables"},
		{"TURBO_TELEMETRY_DISABLED", "1", "Turborepo", "its telemetry",
			"https://turborepo.com/docs/telemetry"},
		{"DOTNET_CLI_TELEMETRY_OPTOUT", "1", ".NET CLI (dotnet)", "its telemetry",
			"https://learn.microsoft.com/dotnet/core/tools/telemetry"},
		{"NEXT_TELEMETRY_DISABLED", "1", "Next.js", "its telemetry",
			"https://nextjs.org/telemetry"},
		{"NG_CLI_ANALYTICS", "false", "Angular CLI", "its usage analytics (and the prompt for them)",
			"https://angular.dev/cli/analytics"},
		{"GATSBY_TELEMETRY_DISABLED", "1", "Gatsby", "its telemetry",
			"https://www.gatsbyjs.com/docs/telemetry/"},
		{"NUXT_TELEMETRY_DISABLED", "1", "Nuxt", "its telemetry",
			"https://github.com/nuxt/telemetry#opting-out"},
		{"ASTRO_TELEMETRY_DISABLED", "1", "Astro", "its telemetry",
			"https://docs.astro.build/en/reference/cli-reference/#astro-telemetry"},
		{"STORYBOOK_DISABLE_TELEMETRY", "1", "Storybook", "its telemetry",
			"https://storybook.js.org/docs/configure/telemetry"},
		{"YARN_ENABLE_TELEMETRY", "0", "Yarn (2 and later)", "its telemetry",
			"https://yarnpkg.com/advanced/telemetry"},
		{"WRANGLER_SEND_METRICS", "false", "Cloudflare Wrangler", "its usage metrics",
			"https://developers.cloudflare.com/workers/wrangler/system-environment-variables/"},
		{"SAM_CLI_TELEMETRY", "0", "AWS SAM CLI", "its telemetry",
			"https://docs.aws.amazon.com/serverless-application-model/latest/developerguide/serverless-sam-telemetry.html"},
		{"AZURE_CORE_COLLECT_TELEMETRY", "false", "Azure CLI (az)", "its telemetry",
			"https://learn.microsoft.com/cli/azure/azure-cli-configuration"},
		{"FUNCTIONS_CORE_TOOLS_TELEMETRY_OPTOUT", "1", "Azure Functions Core Tools (func)", "its telemetry",
			"https://learn.microsoft.com/azure/azure-functions/functions-run-local"},
		{"VCPKG_DISABLE_METRICS", "1", "vcpkg", "its usage metrics",
			"https://learn.microsoft.com/vcpkg/about/privacy"},
		{"HF_HUB_DISABLE_TELEMETRY", "1", "Hugging Face Hub client", "its telemetry",
			"https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables"},
		{"DO_NOT_TRACK", "1", "tools following the Console Do Not Track convention", "their telemetry",
			"https://consoledonottrack.com/"},
	}
}
