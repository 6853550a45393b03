//! An assistant's Markdown as a tree of the few node kinds a page may show. It is data, never
//! HTML: a client builds each node as an element of its own, and text only ever as text, so
//! nothing an LLM writes can become markup, script or a link to anything but the web or mail.

use serde::{Deserialize, Serialize};

/// One node of rendered Markdown. Raw HTML in the source is text here; an image is its alt
/// text; a link whose address is not `http:`, `https:` or `mailto:` is its text alone.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[schema(no_recursion)]
#[derive(strum::EnumDiscriminants)]
#[strum_discriminants(
    name(MarkdownNodeType),
    derive(Hash, strum::IntoStaticStr, strum::VariantArray)
)]
#[strum_discriminants(strum(serialize_all = "snake_case"))]
#[strum_discriminants(doc = "A Markdown node's `type`, as on the wire.")]
pub enum MarkdownNode {
    /// Plain text (soft line breaks are `\n`).
    Text {
        text: String,
    },
    /// Inline code.
    Code {
        text: String,
    },
    /// A hard line break.
    LineBreak,
    /// A thematic break (a horizontal rule).
    Rule,
    Paragraph {
        children: Vec<MarkdownNode>,
    },
    /// A heading, `level` 1 to 6.
    Heading {
        level: u8,
        children: Vec<MarkdownNode>,
    },
    Emphasis {
        children: Vec<MarkdownNode>,
    },
    Strong {
        children: Vec<MarkdownNode>,
    },
    Strikethrough {
        children: Vec<MarkdownNode>,
    },
    BlockQuote {
        children: Vec<MarkdownNode>,
    },
    /// A fenced or indented code block; `language` is the first word of a fence's info string.
    CodeBlock {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        language: Option<String>,
        text: String,
    },
    /// A list of `item`s; numbered from `start` when it is set.
    List {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start: Option<u64>,
        children: Vec<MarkdownNode>,
    },
    Item {
        children: Vec<MarkdownNode>,
    },
    /// A link to an `http:`, `https:` or `mailto:` address.
    Link {
        href: String,
        children: Vec<MarkdownNode>,
    },
    /// A table of `table_row`s, the first the header.
    Table {
        children: Vec<MarkdownNode>,
    },
    TableRow {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        header: bool,
        children: Vec<MarkdownNode>,
    },
    TableCell {
        children: Vec<MarkdownNode>,
    },
}
