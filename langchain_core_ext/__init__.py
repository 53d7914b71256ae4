"""LangChain integration of core-textmodels: a chat model, embeddings, the groundedness check
(a tool) and its report as a LangSmith evaluator, each running in-process or against a server
(``CORE_BASE_URL``)."""

from langchain_core_ext.chat_models import ChatCore
from langchain_core_ext.embeddings import CoreEmbeddings
from langchain_core_ext.evaluation import CoreGroundednessEvaluator
from langchain_core_ext.tools import CoreGroundednessCheck

__all__ = ["ChatCore", "CoreEmbeddings", "CoreGroundednessCheck", "CoreGroundednessEvaluator"]
