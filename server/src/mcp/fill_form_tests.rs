use super::*;

fn args(fields: Value) -> Map<String, Value> {
    let Value::Object(map) = json!({ "fields": fields }) else {
        unreachable!()
    };
    map
}

fn text(answer: &CallToolResult) -> String {
    answer
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.clone()))
        .collect()
}

fn field_of(error: &ErrorBody) -> Option<&str> {
    error.data.as_ref()?.get("field")?.as_str()
}

#[test]
fn each_type_becomes_the_catalogue_call_that_sets_it() {
    let mut a = args(json!([
        {"name": "Email", "type": "textbox", "ref": "e3", "value": "ada@example.test"},
        {"name": "Volume", "type": "slider", "ref": "@e4", "value": "30"},
        {"name": "Country", "type": "combobox", "ref": "e5", "value": "France"},
    ]));
    a.insert("tab_id".into(), json!(7));
    let steps = plan(&a).expect("a plan");
    let calls: Vec<(&str, Value)> = steps
        .iter()
        .map(|s| (s.method, Value::Object(s.params.clone())))
        .collect();
    assert_eq!(
        calls,
        [
            (
                "tool.fill",
                json!({"ref": "e3", "value": "ada@example.test", "tab_id": 7})
            ),
            (
                "tool.fill",
                json!({"ref": "@e4", "value": "30", "tab_id": 7})
            ),
            (
                "tool.select",
                json!({"ref": "e5", "values": ["France"], "tab_id": 7})
            ),
        ]
    );
    assert_eq!(steps[2].name, "Country");
}

#[test]
fn checkboxes_and_radios_become_a_click_to_a_state() {
    let steps = plan(&args(json!([
        {"name": "Email", "type": "textbox", "ref": "e3", "value": "x"},
        {"name": "News", "type": "checkbox", "ref": "e4", "value": "false"},
        {"name": "Express", "type": "radio", "ref": "e5", "value": "true"},
    ])))
    .expect("a plan");
    let clicks: Vec<(&str, Value)> = steps[1..]
        .iter()
        .map(|s| (s.method, Value::Object(s.params.clone())))
        .collect();
    assert_eq!(
        clicks,
        [
            (
                "tool.click",
                json!({"ref": "e4", "latchkey_checked": false})
            ),
            ("tool.click", json!({"ref": "e5", "latchkey_checked": true})),
        ]
    );
    assert!(needs_set_checked(&steps) && !needs_set_checked(&steps[..1]));
    let refused = cannot_set_checked(&steps);
    assert_eq!(field_of(&refused), Some("fields[1].type"));
    assert!(
        refused.message.starts_with("field \"News\": "),
        "{}",
        refused.message
    );
    assert!(refused.message.contains("browser_click"));
}

#[test]
fn one_bad_field_refuses_the_whole_form_naming_it() {
    let good = json!({"name": "Email", "type": "textbox", "ref": "e3", "value": "x"});
    let cases = [
        (
            json!({"name": "Agree", "type": "checkbox", "ref": "e9", "value": "yes"}),
            "fields[1].value",
            "\"true\" or \"false\"",
        ),
        (
            json!({"name": "Pick", "type": "radio", "ref": "e9", "value": "false"}),
            "fields[1].value",
            "checking another of its group",
        ),
        (
            json!({"name": "X", "type": "button", "ref": "e9", "value": "x"}),
            "fields[1].type",
            "textbox, slider, combobox, checkbox or radio",
        ),
        (
            json!({"name": "X", "type": "textbox", "ref": "", "value": "x"}),
            "fields[1].ref",
            "fields[1].ref",
        ),
        (
            json!({"name": "X", "type": "textbox", "ref": "e2", "value": 5}),
            "fields[1].value",
            "must be a string",
        ),
        (
            json!({"type": "textbox", "ref": "e2", "value": "x"}),
            "fields[1].name",
            "must be a string",
        ),
        (
            json!({"name": "n".repeat(MAX_NAME_CHARS + 1), "type": "textbox", "ref": "e2", "value": "x"}),
            "fields[1].name",
            "at most",
        ),
        (json!("Email"), "fields[1]", "object"),
    ];
    for (bad, field, says) in cases {
        let error = plan(&args(json!([good, bad]))).expect_err("refused");
        assert_eq!(error.code, ErrorCode::InvalidParams);
        assert_eq!(field_of(&error), Some(field), "{}", error.message);
        assert!(error.message.contains(says), "{}", error.message);
    }
}

#[test]
fn the_form_itself_is_bounded() {
    for fields in [json!([]), json!("Email"), Value::Null] {
        let error = plan(&args(fields)).expect_err("refused");
        assert_eq!(field_of(&error), Some("fields"));
    }
    let one = json!({"name": "A", "type": "textbox", "ref": "e1", "value": "x"});
    let many = Value::Array(vec![one.clone(); MAX_FIELDS + 1]);
    assert!(plan(&args(many)).is_err());
    let most = Value::Array(vec![one; MAX_FIELDS]);
    assert_eq!(plan(&args(most)).map(|s| s.len()).ok(), Some(MAX_FIELDS));
    let mut bad_tab = args(json!([{"name": "A", "type": "textbox", "ref": "e1", "value": "x"}]));
    bad_tab.insert("tab_id".into(), json!("seven"));
    let error = plan(&bad_tab).expect_err("refused");
    assert_eq!(field_of(&error), Some("tab_id"), "{}", error.message);
}

fn three() -> Vec<Step> {
    plan(&args(json!([
        {"name": "Email", "type": "textbox", "ref": "e3", "value": "ada@example.test"},
        {"name": "Country", "type": "combobox", "ref": "e5", "value": "FR"},
        {"name": "Gift", "type": "checkbox", "ref": "e6", "value": "true"},
    ])))
    .expect("a plan")
}

#[test]
fn a_full_answer_says_what_each_field_holds() {
    let steps = three();
    let done = vec![
        json!({"tab_id": 7, "used_ref": "e3", "value_length": 16}),
        json!({"tab_id": 7, "used_ref": "e5", "multiple": false, "selected_values": ["FR"], "selected_labels": ["France"]}),
        json!({"tab_id": 7, "used_ref": "e6", "x": 1, "y": 2, "latchkey_checked": true, "dialogs": [{"type": "alert"}]}),
    ];
    let answer = answer(&steps, done, None);
    assert_eq!(answer.is_error, Some(false));
    assert_eq!(
        text(&answer),
        "Set 3 of 3 fields:\n- \"Email\" [ref=e3]: typed 16 characters\n\
         - \"Country\" [ref=e5]: selected [\"France\"]\n- \"Gift\" [ref=e6]: checked\n\
         Dialogs: [{\"type\":\"alert\"}]"
    );
    let structured = answer.structured_content.expect("structured");
    assert_eq!(
        structured["fields"][1]["result"]["selected_values"],
        json!(["FR"])
    );
}

#[test]
fn a_failure_says_what_was_set_and_what_was_not_attempted() {
    let steps = three();
    let done = vec![json!({"tab_id": 7, "used_ref": "e3", "value_length": 16})];
    let mut error = ErrorBody::new(ErrorCode::NotFound, "ref e5 is not in the current snapshot");
    error.data = Some(json!({"reason": "ref_not_found"}));
    let answer = answer(&steps, done, Some(error));
    assert_eq!(answer.is_error, Some(true));
    assert_eq!(
        text(&answer),
        "Field 2 of 3, \"Country\" [ref=e5], was not set:\n\
         not_found (ref_not_found): ref e5 is not in the current snapshot\n\
         stale ref: call browser_snapshot again and use a ref from it\n\
         Set before it:\n- \"Email\" [ref=e3]: typed 16 characters\n\
         Not attempted: [\"Gift\"]"
    );
    let structured = answer.structured_content.expect("structured");
    assert_eq!(structured["error"]["code"], "not_found");
    assert_eq!(structured["failed"]["ref"], "e5");
    assert_eq!(structured["set"][0]["name"], "Email");
    assert_eq!(structured["not_attempted"], json!(["Gift"]));
}
