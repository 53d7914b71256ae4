"""LangChain integration of core-textmodels: a chat model, embeddings and the groundedness
check, each running in-process or against a server (``CORE_BASE_URL``)."""

from langchain_core_ext.chat_models import ChatCore
from langchain_core_ext.embeddings import CoreEmbeddings
from langchain_core_ext.tools import CoreGroundednessCheck

__all__ = ["ChatCore", "CoreEmbeddings", "CoreGroundednessCheck"]
