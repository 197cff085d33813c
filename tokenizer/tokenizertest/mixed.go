// Package tokenizertest holds text for tokenizer tests and benchmarks.
package tokenizertest

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// MixedText returns about n bytes of deterministic mixed text for
// benchmarks: English prose, source code, JSON, numbers, Chinese, Japanese,
// Korean, Russian, Arabic, accented Latin (partly decomposed, so NFC has work
// to do), emoji, chat-template markers and odd whitespace. Paragraphs are
// separated by newlines.
func MixedText(n int) string {
	r := rand.New(rand.NewPCG(20261129, 3))
	pick := func(l []string) string { return l[r.IntN(len(l))] }
	var b strings.Builder
	b.Grow(n + 4096)
	for b.Len() < n {
		switch k := r.IntN(20); {
		case k < 7: // English prose
			for s := 0; s < 2+r.IntN(5); s++ {
				w := 5 + r.IntN(15)
				for i := 0; i < w; i++ {
					word := pick(englishWords)
					if i == 0 {
						word = strings.ToUpper(word[:1]) + word[1:]
					} else {
						b.WriteByte(' ')
					}
					b.WriteString(word)
					switch r.IntN(30) {
					case 0:
						b.WriteString(",")
					case 1:
						b.WriteString(" " + strconv.Itoa(r.IntN(100000)))
					case 2:
						b.WriteString("'s")
					}
				}
				b.WriteString(pick([]string{". ", "? ", "! ", ".\n", "; "}))
			}
		case k < 9: // code
			b.WriteString(pick(codeSnippets))
			b.WriteString("\n\n")
		case k < 10: // JSON
			b.WriteString(`{"id": ` + strconv.Itoa(r.IntN(1e6)) + `, "name": "` + pick(englishWords) + "_" + pick(englishWords) +
				`", "score": ` + strconv.FormatFloat(r.Float64()*100, 'f', 3, 64) + `, "tags": ["` + pick(englishWords) + `", "` +
				pick(cyrillicWords) + `"], "ok": ` + strconv.FormatBool(r.IntN(2) == 0) + "}\n")
		case k < 13: // Chinese
			for i := 0; i < 20+r.IntN(60); i++ {
				b.WriteString(string(hanzi[r.IntN(len(hanzi))]))
				if r.IntN(12) == 0 {
					b.WriteString(pick([]string{"，", "。", "、", "：", "？", "！"}))
				}
			}
			b.WriteString("。\n")
		case k < 14: // Japanese and Korean
			for i := 0; i < 4+r.IntN(8); i++ {
				b.WriteString(pick(japaneseKorean))
				if r.IntN(3) == 0 {
					b.WriteString(" ")
				}
			}
			b.WriteString("\n")
		case k < 16: // Russian, Arabic, accented Latin
			for i := 0; i < 6+r.IntN(12); i++ {
				switch r.IntN(3) {
				case 0:
					b.WriteString(pick(cyrillicWords))
				case 1:
					b.WriteString(pick(arabicWords))
				default:
					b.WriteString(pick(latinWords))
				}
				b.WriteString(pick([]string{" ", " ", " ", ", ", "  ", "\u00a0"}))
			}
			b.WriteString(".\n")
		case k < 17: // numbers, dates, identifiers
			for i := 0; i < 8; i++ {
				b.WriteString(pick([]string{
					strconv.Itoa(r.IntN(1e9)), strconv.FormatFloat(r.NormFloat64()*1e3, 'g', 6, 64),
					"2026-" + strconv.Itoa(1+r.IntN(12)) + "-" + strconv.Itoa(1+r.IntN(28)) + "T12:00:00Z",
					"0x" + strconv.FormatUint(r.Uint64()>>r.IntN(60), 16), "v" + strconv.Itoa(r.IntN(10)) + "." + strconv.Itoa(r.IntN(30)),
					pick(englishWords) + strconv.Itoa(r.IntN(1000)) + "_" + strings.ToUpper(pick(englishWords)),
				}))
				b.WriteString(pick([]string{" ", ", ", "\t", " | "}))
			}
			b.WriteString("\n")
		case k < 18: // emoji and symbols
			for i := 0; i < 5+r.IntN(10); i++ {
				b.WriteString(pick(emoji))
				b.WriteString(pick([]string{"", " ", " ", "!"}))
			}
			b.WriteString("\n")
		case k < 19: // chat template
			b.WriteString("<|im_start|>user\n" + pick(englishWords) + " " + pick(englishWords) + "?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
		default: // whitespace runs
			b.WriteString(pick([]string{"    ", "\t\t", "  \n  \n", "\r\n", "\n\n\n", " \u3000 ", "   x  "}))
			b.WriteString(pick(englishWords))
			b.WriteString("\n")
		}
	}
	return b.String()
}

var englishWords = strings.Fields(`the of and to in is that for it as was with be by on not he this are or his from at
which but have an they you were her she there been one all we their has would when if so what about more no out up
into them can some could time than other only new these two may first then do any like my now over such our man me
even most made after also did many before must through back years where much your way well down should because each
just those people how too little state good very make world still own see men work long get here between both life
being under never day same another know while last might us great old year off come since against go came right used
take three decision model token evidence question answer option probability calibrated daemon socket request batch
prefill attention kernel metal tokenizer vocabulary merge throughput benchmark latency memory weights checkpoint
shouldn't didn't it's we're they've I'll you'd isn't won't can't Internationalization JavaScript PostgreSQL`)

var codeSnippets = []string{
	"func (t *Tokenizer) Encode(s string) []int32 {\n\tout := make([]int32, 0, len(s)/3)\n\tfor i := 0; i < len(s); i++ {\n\t\tout = append(out, int32(s[i]))\n\t}\n\treturn out\n}",
	"def forward(self, x: torch.Tensor) -> torch.Tensor:\n    h = self.norm(x)\n    return x + self.mlp(h) * 0.5  # residual\n",
	"for (int i = 0; i < n; ++i) {\n    sum += a[i] * b[i];\n}\nprintf(\"%d\\n\", sum);",
	"SELECT id, name, COUNT(*) AS n FROM users WHERE created_at >= '2026-01-01' GROUP BY id, name ORDER BY n DESC LIMIT 10;",
	"<div class=\"row\"><span id=\"x-1\">Hello &amp; welcome</span></div>",
	"if err != nil {\n\t\treturn fmt.Errorf(\"load %s: %w\", path, err)\n\t}",
	"const x = arr.map((v, i) => v ** 2 + i).filter(Boolean); // squares\nconsole.log(`total: ${x.length}`);",
	"    let mut v: Vec<u32> = Vec::with_capacity(1024);\n    v.extend_from_slice(&[1, 2, 3]);",
}

var hanzi = []rune(`的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴切支宝确跑春低细整敢端县群谢试装营企响际模型数据测试`)

var japaneseKorean = []string{"日本語", "カタカナ", "ひらがな", "東京", "の", "は", "です", "ありがとう", "こんにちは", "テスト",
	"한국어", "문장", "입니다", "안녕하세요", "감사합니다", "서울", "데이터", "모델"}

var cyrillicWords = []string{"привет", "мир", "Москва", "данные", "модель", "решение", "вопрос", "ответ", "ёлка", "Съешь",
	"этих", "мягких", "французских", "булок"}

var arabicWords = []string{"مرحبا", "بالعالم", "السلام", "عليكم", "نموذج", "بيانات", "שלום", "עולם", "नमस्ते", "दुनिया", "สวัสดี"}

var latinWords = []string{"café", "naïve", "Ærøskøbing", "Straße", "façade", "jalapen\u0303o", "cafe\u0301", "Åström",
	"ĳssel", "Ωmega", "Ελληνικά", "ǅemal", "résumé", "Ünïcödé", "ﬁnal", "Ｆｕｌｌｗｉｄｔｈ"}

var emoji = []string{"😀", "👍🏽", "👨\u200d👩\u200d👧", "❤️", "✅", "🇫🇷", "🤖", "∑", "∞", "≈", "→", "€", "£", "½", "™", "©", "①"}
