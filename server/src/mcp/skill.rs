//! The agent skill over MCP (docs/mcp.md, "The skill"): `skills/latchkey/SKILL.md`,
//! compiled into the binary, served as the resource `skill://latchkey/SKILL.md`
//! and through the Skills extension (`skills/list`, `skills/get`), so an agent
//! connected by URL learns how to behave in a lent browser without installing
//! anything.

use std::sync::LazyLock;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    GetSkillResult, ListResourcesResult, ListSkillsResult, ReadResourceResult, Resource,
    ResourceContents, Skill, SkillFrontmatter, SkillResource, SkillResources,
};

/// The skill's text, as committed.
pub const SKILL_MD: &str = include_str!("../../../skills/latchkey/SKILL.md");
/// Its resource URI.
pub const SKILL_URI: &str = "skill://latchkey/SKILL.md";
const MIME: &str = "text/markdown";

/// The `key: value` lines between the opening `---` lines.
fn frontmatter(text: &str) -> Vec<(&str, &str)> {
    let mut lines = text.lines();
    if lines.next() != Some("---") {
        return Vec::new();
    }
    lines
        .take_while(|l| *l != "---")
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect()
}

static SKILL: LazyLock<Skill> = LazyLock::new(|| {
    let fields = frontmatter(SKILL_MD);
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| *k == name)
            .map_or("", |(_, v)| *v)
    };
    let mut front = SkillFrontmatter::new(field("name"), field("description"));
    for (key, value) in &fields {
        if !matches!(*key, "name" | "description") {
            front = front.with_field(*key, serde_json::Value::String((*value).to_string()));
        }
    }
    Skill::new(
        SKILL_URI,
        front,
        SkillResources::Files(vec![SkillResource::from_bytes(
            SKILL_URI,
            SKILL_MD.as_bytes(),
        )]),
    )
});

fn resource() -> Resource {
    Resource::new(SKILL_URI, "latchkey skill")
        .with_description("How to use a person's lent browser through Latchkey: read first")
        .with_mime_type(MIME)
        .with_size(SKILL_MD.len() as u64)
}

pub fn list_resources() -> ListResourcesResult {
    ListResourcesResult::with_all_items(vec![resource()])
}

pub fn read_resource(uri: &str) -> Result<ReadResourceResult, McpError> {
    if uri != SKILL_URI {
        return Err(McpError::resource_not_found(
            format!("no resource {uri:?}: resources/list names them"),
            None,
        ));
    }
    let contents = ResourceContents::text(SKILL_MD, SKILL_URI).with_mime_type(MIME);
    Ok(ReadResourceResult::new(vec![contents]))
}

pub fn list_skills() -> ListSkillsResult {
    ListSkillsResult::with_all_items(vec![SKILL.clone()])
}

pub fn get_skill(uri: &str) -> Result<GetSkillResult, McpError> {
    if uri != SKILL_URI {
        return Err(McpError::invalid_params(
            format!("no skill at {uri:?}: skills/list names them"),
            None,
        ));
    }
    Ok(GetSkillResult::new(SKILL.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skill_is_named_and_described_from_its_frontmatter() {
        assert_eq!(SKILL.frontmatter.name, "latchkey");
        assert!(SKILL.frontmatter.description.contains("MCP"));
        assert!(SKILL.frontmatter.extra.contains_key("license"));
        assert_eq!(SKILL.validate(), Ok(()));
        assert!(read_resource("skill://other/SKILL.md").is_err());
        assert!(get_skill(SKILL_URI).is_ok());
    }
}
