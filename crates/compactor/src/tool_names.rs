//! Every sentence of the context that points the model to a tool, built from the names the
//! caller gives ([`ToolNames`]).
//!
//! The tools are recall's, and the compactor never depends on recall: it never spells a tool's
//! name itself. The engine fills [`ToolNames`] from `strata_recall::Tool`, so renaming a tool
//! changes every text here, and renaming a `Tool` variant fails to compile where the names are
//! filled. A compactor given no names (one used without the tools) says nothing about tools:
//! no sentence promises the model a tool it does not have.

/// The names of the tools the context's texts point the model to: the scaffold and its
/// acknowledgement, the stub of an oversized message, the note on left-out messages, the
/// count of memories not shown and the bootstrap turn's guidelines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolNames {
    /// The tool that opens a node into its parts or source messages (`expand_summary`).
    pub expand_summary: String,
    /// The tool that shows one message whole, page by page (`view_message`).
    pub view_message: String,
    /// The keyword search (`memory_grep`).
    pub memory_grep: String,
    /// The search by meaning (`memory_search`).
    pub memory_search: String,
    /// The tool that lists the persona's memories (`memory_list`).
    pub memory_list: String,
    /// The persona's timeline across sessions (`view_chat_history_summary`).
    pub view_chat_history_summary: String,
}

/// The assistant's reply to the scaffold, fixed for a set of names so the prefix stays
/// byte-identical.
pub(crate) fn acknowledgement(names: Option<&ToolNames>) -> String {
    let mut text = "Understood. I have the summaries of the earlier conversation.".to_owned();
    if let Some(n) = names {
        text.push_str(&format!(
            " When I need details from it I will use {}, {}, {} or {} instead of guessing.",
            n.expand_summary, n.view_message, n.memory_grep, n.memory_search
        ));
    }
    text
}

/// The scaffold's last line: how to see more (empty without tools).
pub(crate) fn scaffold_tools_line(names: Option<&ToolNames>) -> String {
    names.map_or_else(String::new, |n| {
        format!(
            "To see more: {}(node_id) opens a summary into its parts or its original messages; {}(message_id) \
             shows one message in full (long ones page by page); {} and {} find anything said earlier by keyword \
             or by meaning.",
            n.expand_summary, n.view_message, n.memory_grep, n.memory_search
        )
    })
}

/// What follows the count of roots left out of the scaffold's listing.
pub(crate) fn skipped_roots_hint(names: Option<&ToolNames>) -> String {
    names.map_or_else(String::new, |n| format!("; {} works on any node id", n.expand_summary))
}

/// How an oversized message shown as a stub is read whole, as the sentence after "It is
/// stored whole".
pub(crate) fn read_whole(names: Option<&ToolNames>, id: impl std::fmt::Display) -> String {
    names.map_or_else(String::new, |n| {
        let tool = &n.view_message;
        format!(
            ": read it page by page with {tool}(message_id={id}), then {tool}(message_id={id}, offset=N) with the \
             next_offset each answer gives, until next_offset is null"
        )
    })
}

/// How messages left out of the context are found, after "stored whole".
pub(crate) fn find_left_out(names: Option<&ToolNames>) -> String {
    names.map_or_else(String::new, |n| {
        format!(". Read them with {}(message_id) or find them with {}", n.view_message, n.memory_grep)
    })
}

/// What follows the count of memories not shown on a bootstrap turn.
pub(crate) fn more_memories_hint(names: Option<&ToolNames>) -> String {
    names.map_or_else(String::new, |n| format!(": {} lists them all", n.memory_list))
}

/// The guidelines' two bullets about the history tool (DESIGN.md §3, step 6), each one line
/// ending in a newline; empty without tools.
pub(crate) fn history_tool_bullets(names: Option<&ToolNames>) -> String {
    names.map_or_else(String::new, |n| {
        let tool = &n.view_chat_history_summary;
        format!(
            "- 💡 You have access to the `{tool}` tool, which retrieves a consolidated chat history summary and \
             chronological timeline of recent events across active threads/channels.\n\
             - 💡 If the user's current request below refers to external threads, other chats, or events you \
             cannot locate in this session's history, you MUST call `{tool}` to read the global context and \
             synchronize before providing a response.\n"
        )
    })
}
