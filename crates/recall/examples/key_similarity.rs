//! Cosine similarity of memory keys by meaning, on pairs that are and are not the same memory:
//! the measurement behind `near_duplicate_meaning` (benches/README.md, "Memory keys by meaning").
//!
//! `cargo run -p strata-recall --example key_similarity` (needs `scripts/fetch-embed-assets.sh`).
//! Each pair is embedded three ways: the key alone, the key with its title, and the key, title
//! and content; the check takes the higher of the first and the last, and the last column says
//! what the default thresholds decide (`near_duplicate_meaning` within a script, `near_duplicate_meaning_across_scripts`
//! between two scripts: Latin, CJK, Cyrillic, Greek, Arabic, ...).

use strata_recall::Embedder;
use strata_recall::RecallConfig;
use strata_recall::embedding::{cosine, meaning_text, script_of};

/// A memory as the check sees it: key, title, content.
type Memory = (&'static str, &'static str, &'static str);

const STANDARD_JAPANESE: Memory = (
    "standard_japanese",
    "Standard Japanese textbook",
    "User works through 新版标准日本语 (Standard Japanese) elementary vol. 1; finished lesson 12, about an hour a day.",
);
const BIAORI_STUDY: Memory =
    ("标日学习", "标日学习进度", "用户在自学《新版标准日本语》初级上册，学完第12课，每天学习一小时。");
const TEXTBOOK_STUDY: Memory = (
    "japanese_textbook_study",
    "Japanese textbook study",
    "The user studies the Standard Japanese (标准日本语) textbook, now on lesson 13.",
);

const JLPT: Memory =
    ("jlpt_n4_exam", "JLPT N4 exam date", "User registered for the JLPT N4 exam on 2026-12-06 in Shanghai.");
const SPANISH: Memory =
    ("spanish_course", "Spanish evening course", "User attends a Spanish evening course on Tuesdays.");
const ENGLISH_STUDY: Memory =
    ("英语学习", "英语学习计划", "用户每天背30个新概念英语单词，目标是明年考雅思。");
const JAPAN_TRIP: Memory = ("日本旅行", "日本旅行计划", "用户计划明年四月去日本京都旅行一周，预算两万元。");

const RUSSIAN_SPANISH: Memory = (
    "изучение_испанского",
    "Изучение испанского",
    "Пользователь учит испанский по учебнику «Aula Internacional 2», закончил урок 5 (unidad 5).",
);
const SPANISH_STUDY: Memory = (
    "spanish_study",
    "Spanish study",
    "User learns Spanish with the textbook Aula Internacional 2; finished unidad 5.",
);
const AULA_PROGRESS: Memory = (
    "aula_internacional_progress",
    "Aula Internacional progress",
    "Finished unidad 5 of Aula Internacional 2, the Spanish textbook.",
);
const KOREAN_GUITAR: Memory = (
    "기타_연습",
    "기타 연습",
    "사용자는 Yamaha FG800 기타로 매일 30분 연습하고, Hotel California 인트로를 배우는 중이다.",
);
const GUITAR_LESSONS: Memory = (
    "guitar_practice",
    "Guitar practice",
    "User practises 30 minutes a day on a Yamaha FG800 guitar, learning the Hotel California intro.",
);
const YAMAHA_PRACTICE: Memory = (
    "daily_guitar_routine",
    "Daily guitar routine",
    "Plays the Yamaha FG800 every day; working on the Hotel California intro.",
);
const GREEK_MARATHON: Memory = (
    "προπόνηση_μαραθωνίου",
    "Προπόνηση μαραθωνίου",
    "Ο χρήστης προπονείται για τον Athens Marathon στις 8 Νοεμβρίου, 50 km την εβδομάδα.",
);
const MARATHON_TRAINING: Memory = (
    "marathon_training",
    "Marathon training",
    "User trains for the Athens Marathon on 8 November, running 50 km a week.",
);
const ATHENS_RACE: Memory = (
    "athens_race_plan",
    "Athens race plan",
    "Training plan for the Athens Marathon (8 November): 50 km a week.",
);

/// An existing memory, a proposed one, and whether they are the same memory.
const PAIRS: &[(Memory, Memory, bool)] = &[
    // The case of issue 24, in every order.
    (STANDARD_JAPANESE, BIAORI_STUDY, true),
    (STANDARD_JAPANESE, TEXTBOOK_STUDY, true),
    (BIAORI_STUDY, STANDARD_JAPANESE, true),
    (BIAORI_STUDY, TEXTBOOK_STUDY, true),
    (TEXTBOOK_STUDY, STANDARD_JAPANESE, true),
    (TEXTBOOK_STUDY, BIAORI_STUDY, true),
    (
        ("user_timezone", "TZ", "UTC+2"),
        ("time_zone_of_the_user", "TZ", "Europe/Paris, UTC+2 in summer"),
        true,
    ),
    (
        ("preferred_editor", "Editor", "helix, with the default keymap"),
        ("favourite_code_editor", "Code editor the user likes", "The user edits code in helix."),
        true,
    ),
    (
        ("租房预算", "租房预算", "用户每月房租预算 6000 元以内（rent budget）。"),
        ("rent_budget", "Monthly rent budget", "Rent must stay under 6,000 CNY a month (租房预算)."),
        true,
    ),
    (BIAORI_STUDY, ("日语教材", "日语教材学习", "用户在学《标准日本语》初级上册，已经到第13课。"), true),
    (
        ("deploy_steps", "Deploy", "build, test, ship with make release"),
        ("release_procedure", "How to ship a release", "Run the tests, then make release; ship on Fridays."),
        true,
    ),
    // Other scripts (issue 39): each native key beside an English twin and a second English
    // key, and a different memory in the same script.
    (RUSSIAN_SPANISH, SPANISH_STUDY, true),
    (SPANISH_STUDY, RUSSIAN_SPANISH, true),
    (RUSSIAN_SPANISH, AULA_PROGRESS, true),
    (SPANISH_STUDY, AULA_PROGRESS, true),
    (
        RUSSIAN_SPANISH,
        ("поездка_в_сочи", "Поездка в Сочи", "Пользователь едет в Сочи в июле на 10 дней."),
        false,
    ),
    (KOREAN_GUITAR, GUITAR_LESSONS, true),
    (GUITAR_LESSONS, KOREAN_GUITAR, true),
    (KOREAN_GUITAR, YAMAHA_PRACTICE, true),
    (GUITAR_LESSONS, YAMAHA_PRACTICE, true),
    (KOREAN_GUITAR, ("영어_공부", "영어 공부", "사용자는 매일 영어 단어 30개를 외운다."), false),
    (GREEK_MARATHON, MARATHON_TRAINING, true),
    (MARATHON_TRAINING, GREEK_MARATHON, true),
    (GREEK_MARATHON, ATHENS_RACE, true),
    (MARATHON_TRAINING, ATHENS_RACE, true),
    (
        GREEK_MARATHON,
        ("μαθήματα_μαγειρικής", "Μαθήματα μαγειρικής", "Ο χρήστης κάνει μαθήματα μαγειρικής κάθε Σάββατο."),
        false,
    ),
    (MARATHON_TRAINING, SPANISH_STUDY, false),
    (GUITAR_LESSONS, SPANISH_STUDY, false),
    // Different memories, several of the same field or script.
    (STANDARD_JAPANESE, JLPT, false),
    (STANDARD_JAPANESE, SPANISH, false),
    (BIAORI_STUDY, ENGLISH_STUDY, false),
    (BIAORI_STUDY, ("健身计划", "每周健身计划", "用户每周一三五去健身房，每次一小时。"), false),
    (BIAORI_STUDY, JAPAN_TRIP, false),
    (
        TEXTBOOK_STUDY,
        ("python_textbook_study", "Python textbook study", "User reads Fluent Python, now chapter 5."),
        false,
    ),
    (
        STANDARD_JAPANESE,
        ("home_wifi_password", "Home Wi-Fi password", "Stored in the password manager under 'home'."),
        false,
    ),
    (BIAORI_STUDY, JLPT, false),
    (BIAORI_STUDY, SPANISH, false),
    (TEXTBOOK_STUDY, ENGLISH_STUDY, false),
    (STANDARD_JAPANESE, ENGLISH_STUDY, false),
    (STANDARD_JAPANESE, JAPAN_TRIP, false),
    (
        STANDARD_JAPANESE,
        (
            "japanese_grammar_questions",
            "Open Japanese grammar questions",
            "User asked when to use は and when が.",
        ),
        false,
    ),
    (("staging_port", "Port", "8443"), ("production_port", "Port", "443"), false),
    (
        ("database_password_rotation", "DB", "30 days"),
        ("db_password_rotation", "DB password rotation", "Rotate the database password every 30 days."),
        true,
    ),
    (("user_timezone", "TZ", "UTC+2"), ("weekly_grocery_list", "Food", "eggs, rice, tofu"), false),
    (
        ("deploy_steps", "Deploy", "build, test, ship with make release"),
        ("database_url", "Database URL", "postgres://db.internal:5432/app"),
        false,
    ),
    (
        ("租房预算", "租房预算", "用户每月房租预算 6000 元以内（rent budget）。"),
        ("旅行预算", "日本旅行预算", "用户计划明年四月去日本旅行，预算两万元。"),
        false,
    ),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let embedder = Embedder::load_default()?;
    let config = RecallConfig::default();
    println!(
        "| existing | proposed | same? | scripts | key | key + title | key + title + content | decided |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for ((key_a, title_a, content_a), (key_b, title_b, content_b), same) in PAIRS {
        let texts = [
            meaning_text(key_a, "", ""),
            meaning_text(key_b, "", ""),
            meaning_text(key_a, title_a, ""),
            meaning_text(key_b, title_b, ""),
            meaning_text(key_a, title_a, content_a),
            meaning_text(key_b, title_b, content_b),
        ];
        let vectors = embedder.embed(&texts)?;
        let across = script_of(key_a, title_a) != script_of(key_b, title_b);
        let threshold =
            if across { config.near_duplicate_meaning_across_scripts } else { config.near_duplicate_meaning };
        let (key, full) = (cosine(&vectors[0], &vectors[1]), cosine(&vectors[4], &vectors[5]));
        // As the check: the keys alone count only within a script the model has words for.
        let script = script_of(key_a, title_a);
        let keys_count = !across && script.has_model_words();
        let twin = f64::from(if keys_count { key.max(full) } else { full }) >= threshold;
        println!(
            "| `{key_a}` | `{key_b}` | {} | {} | {:.3} | {:.3} | {full:.3} | {}{} |",
            if *same { "same" } else { "different" },
            if across { "across" } else { "one" },
            key,
            cosine(&vectors[2], &vectors[3]),
            if twin { "twin" } else { "apart" },
            if twin == *same { "" } else { " (wrong)" },
        );
    }
    Ok(())
}
