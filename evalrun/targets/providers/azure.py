"""The ``azure`` target: Azure OpenAI deployments. Same body and response as ``openai``; only
the URL (a deployment plus ``api-version``), the ``api-key`` header and the ``model`` (the
deployment name) differ."""

from __future__ import annotations

from evalrun.errors import ConfigError
from evalrun.targets.config import TargetConfig
from evalrun.targets.providers.openai import ChatCompletionsTarget

DEFAULT_API_VERSION = "2024-10-21"


class AzureOpenAITarget(ChatCompletionsTarget):
    kind = "azure"

    def __init__(self, config: TargetConfig, api_key: str | None) -> None:
        super().__init__(config, api_key)
        self.require_key()
        endpoint = config.extra("endpoint") or config.base_url
        deployment = config.extra("deployment") or config.model
        if not endpoint:
            raise ConfigError(
                f"target '{config.name}' (azure) needs 'endpoint' "
                "(https://<resource>.openai.azure.com)"
            )
        if not deployment:
            raise ConfigError(f"target '{config.name}' (azure) needs 'deployment' (or 'model')")
        self.base_url = str(endpoint).rstrip("/")
        #: the deployment picks the model; the body names it too, as ``openai.AzureOpenAI``
        #: does (docs/targets.md)
        self.deployment = self.model_name = str(deployment)
        self.api_version = str(config.extra("api_version") or DEFAULT_API_VERSION)

    def url(self) -> str:
        return f"{self.base_url}/openai/deployments/{self.deployment}/chat/completions"

    def headers(self) -> dict[str, str]:
        return {"api-key": self.require_key()}

    def params(self) -> dict[str, str] | None:
        return {"api-version": self.api_version}
