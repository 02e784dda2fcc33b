"""strata under agent frameworks, each in its own module that imports its framework only when
used (install the extra of the same name):

- :mod:`strata.integrations.agents`: ``StrataSession``, a ``Session`` of the OpenAI Agents SDK
  (``pip install strata-memory[agents]``);
- :mod:`strata.integrations.langgraph`: ``StrataStore``, a LangGraph ``BaseStore`` over the
  persona's memories (``strata-memory[langgraph]``);
- :mod:`strata.integrations.langchain`: ``StrataChatHistory``, a LangChain chat message history
  (``strata-memory[langchain]``).
"""
