//! Unit tests of the TOPv2 conversion.

use super::*;
use serde_json::Value;

fn calls(parse_text: &str, utterance: &str) -> Result<Vec<(String, String, Value)>, Refusal> {
    let tree = parse(parse_text).expect("parses");
    let (lowered, _) = lower(&tree, utterance)?;
    let mut s = Shapes::default();
    for l in &lowered {
        s.observe(&l.call);
    }
    Ok(lowered
        .iter()
        .map(|l| {
            let c = s.call(&l.call, l.label.clone());
            (c.name, c.label, Value::Object(c.arguments))
        })
        .collect())
}

#[test]
fn parser_errors_say_where() {
    assert!(parse("[IN:A x [SL:B y ]").unwrap_err().contains("never closed"));
    assert!(parse("[IN:A x ] ]").unwrap_err().contains("token 4"));
    assert!(parse("[IN:A [XX:B x ] ]").unwrap_err().contains("neither"));
    assert!(parse("x [IN:A ]").unwrap_err().contains("must start"));
    assert!(parse("").is_err());
}

#[test]
fn nested_intent_is_an_earlier_call_and_names_are_whole() {
    // navigation_train.tsv: GET_LOCATION_HOME nested in a slot of GET_ESTIMATED_DURATION.
    let got = calls(
        "[IN:GET_ESTIMATED_DURATION how long to [SL:DESTINATION [IN:GET_LOCATION_HOME [SL:CONTACT my ] home ] ] from [SL:SOURCE [IN:GET_LOCATION [SL:POINT_ON_MAP the mall ] ] ] ]",
        "how long to my home from the mall",
    )
    .unwrap();
    assert_eq!(
        got,
        vec![
            (
                "get_location_home".into(),
                "get_location_home_1".into(),
                json!({"contact": "my"})
            ),
            (
                "get_location".into(),
                "get_location_1".into(),
                json!({"point_on_map": "the mall"})
            ),
            (
                "get_estimated_duration".into(),
                "get_estimated_duration_1".into(),
                json!({"destination": "$get_location_home_1$", "source": "$get_location_1$"})
            ),
        ]
    );
}

#[test]
fn words_map_to_raw_text_and_repeated_slots_are_refused() {
    let got = calls(
        "[IN:CREATE_REMINDER [SL:TODO my doctor 's appointment ] [SL:DATE_TIME today ] ]",
        "my  doctor's appointment today",
    )
    .unwrap();
    assert_eq!(
        got[0].2,
        json!({"todo": "my  doctor's appointment", "date_time": "today"})
    );
    // A slot twice in one intent: one value per slot, so the row goes (`repeated_slot`).
    let err = calls(
        "[IN:CREATE_REMINDER [SL:TODO x ] [SL:DATE_TIME today ] and [SL:DATE_TIME tomorrow ] ]",
        "x today and tomorrow",
    )
    .unwrap_err();
    assert_eq!(err.0, "repeated_slot");
    // The same slot in two intents is no repetition.
    let got = calls(
        "[IN:GET_WEATHER [SL:LOCATION [IN:GET_LOCATION [SL:A x ] ] ] [SL:DATE_TIME [IN:GET_LOCATION [SL:A y ] ] ] ]",
        "x y",
    )
    .unwrap();
    assert_eq!(
        got.iter().map(|c| c.1.as_str()).collect::<Vec<_>>(),
        vec!["get_location_1", "get_location_2", "get_weather_1"]
    );
}

#[test]
fn refusals() {
    assert_eq!(
        calls("[IN:A [SL:B [IN:UNSUPPORTED_WEATHER x ] ] ]", "x").unwrap_err().0,
        "unsupported_intent"
    );
    assert_eq!(calls("[IN:A [SL:B [IN:C x ] y ] ]", "x y").unwrap_err().0, "mixed_slot");
    assert_eq!(calls("[IN:A [SL:B ] ]", "").unwrap_err().0, "empty_slot");
    assert_eq!(calls("[IN:A [IN:C x ] ]", "x").unwrap_err().0, "unexpected_nesting");
}

#[test]
fn malformed_rows_are_bad_records_with_lines() {
    let text = "domain\tutterance\tsemantic_parse\nweather\tsun\t[IN:GET_WEATHER sun ]\nweather\tbad\t[IN:GET_WEATHER bad\nweather\ttwo fields\n";
    let r = convert_text(text, "w.tsv", "weather", "test");
    assert_eq!(r.bad.len(), 2);
    assert!(
        r.bad[0].message.starts_with("line 3:") && r.bad[0].record == 1,
        "{:?}",
        r.bad
    );
    assert!(r.bad[1].message.starts_with("line 4:"), "{:?}", r.bad);
    let c = assemble(vec![r]);
    let o = &c.splits["test"];
    assert_eq!((o.attempted, o.examples.len(), o.drops.len()), (3, 1, 2));
    assert!(o.drops.iter().all(|d| d.reason == "parse_error"));
}
