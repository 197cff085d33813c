package decide

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
)

// This file derives the jevfmt/1 config of a checkpoint that has no
// decision_config.json: a plain Qwen3.5 chat checkpoint, run zero-shot
// (format.md, "Checkpoints without a decision config").

// DefaultSystem is jevfmt/1's default system text: the derived config's,
// and the demo checkpoint's.
const DefaultSystem = "You are a careful analyst. Read the evidence, then answer the question with the letter of exactly one option."

// DefaultLetters are jevfmt/1's option letters.
const DefaultLetters = "ABCDEFGHIJKLMNOPQRSTUVWXY"

// DefaultWideChoice is the default wide-choice rule: groups of 25, the best
// 3 of each survive, the eliminated share 0.001.
var DefaultWideChoice = WideChoice{Group: 25, Keep: 3, Residual: 0.001}

// DefaultTemperature is the derived config's temperature for every
// question type: the model's own probabilities, not calibrated.
const DefaultTemperature = 1.0

// The files a chat template is read from, in the order they are tried (a
// chat_template.jinja overrides tokenizer_config.json's, as in
// transformers).
var chatTemplateFiles = []string{"chat_template.jinja", "chat_template.json", "tokenizer_config.json"}

// DeriveConfig returns the jevfmt/1 config of a checkpoint without a
// decision_config.json: [DefaultSystem], [DefaultLetters] with the ids tok
// gives them, [DefaultTemperature] for every type, [DefaultWideChoice], and
// the think block its chat template opens the assistant turn with
// ([ThinkBlockOf]). read reads the checkpoint's files by name (a missing
// one answers an error wrapping fs.ErrNotExist). A letter that is not
// exactly one token, or a chat template that is missing or does not say, is
// an error naming it.
func DeriveConfig(tok Encoder, read func(name string) ([]byte, error)) (*Config, error) {
	c := &Config{
		Format:            Format,
		System:            DefaultSystem,
		Letters:           DefaultLetters,
		TemperatureByType: map[string]float64{string(Noul): DefaultTemperature, string(Choice): DefaultTemperature, string(Score): DefaultTemperature},
		WideChoice:        DefaultWideChoice,
	}
	for i, l := range DefaultLetters {
		ids := tok.Encode(string(l))
		if len(ids) != 1 {
			return nil, fmt.Errorf("no %s, and none can be derived: letter %q (index %d) tokenises to %d tokens %v, not one; write a %s with letters that are", ConfigFile, l, i, len(ids), ids, ConfigFile)
		}
		c.LetterTokenIDs = append(c.LetterTokenIDs, int(ids[0]))
	}
	var err error
	if c.ThinkBlock, err = ChatThinkBlock(read); err != nil {
		return nil, fmt.Errorf("no %s, and none can be derived: %w", ConfigFile, err)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("derived %s: %w", ConfigFile, err)
	}
	return c, nil
}

// ChatThinkBlock reads a checkpoint's chat template (read reads its files
// by name, as for [DeriveConfig]) and returns the think block its
// assistant turn opens with ([ThinkBlockOf]); the error names the file.
func ChatThinkBlock(read func(name string) ([]byte, error)) (string, error) {
	tmpl, file, err := readChatTemplate(read)
	if err != nil {
		return "", err
	}
	think, err := ThinkBlockOf(tmpl)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return think, nil
}

// MarshalFile returns c as the text of a decision_config.json.
func (c *Config) MarshalFile() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	return append(b, '\n'), nil
}

// readChatTemplate returns the checkpoint's chat template and the file it
// was read from: chat_template.jinja, chat_template.json's "chat_template",
// or tokenizer_config.json's (a string, or a list of named templates of
// which "default" is taken).
func readChatTemplate(read func(name string) ([]byte, error)) (tmpl, file string, err error) {
	for _, file := range chatTemplateFiles {
		data, err := read(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", file, err
		}
		if strings.HasSuffix(file, ".jinja") {
			return string(data), file, nil
		}
		var f struct {
			ChatTemplate json.RawMessage `json:"chat_template"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return "", file, fmt.Errorf("%s: %w", file, err)
		}
		if len(f.ChatTemplate) == 0 || string(f.ChatTemplate) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(f.ChatTemplate, &s); err == nil {
			return s, file, nil
		}
		var named []struct {
			Name     string `json:"name"`
			Template string `json:"template"`
		}
		if err := json.Unmarshal(f.ChatTemplate, &named); err != nil {
			return "", file, fmt.Errorf("%s: chat_template is neither a string nor a list of {name, template}", file)
		}
		for _, t := range named {
			if t.Name == "default" {
				return t.Template, file, nil
			}
		}
		return "", file, fmt.Errorf("%s: chat_template lists no template named \"default\"", file)
	}
	return "", "", fmt.Errorf("no chat template (%s): how the model's turn opens is unknown", strings.Join(chatTemplateFiles, ", "))
}

var (
	// generationPrompt finds the block a chat template renders the opening
	// of the assistant's turn in.
	generationPrompt = regexp.MustCompile(`\{%-?\s*if\s+add_generation_prompt\b`)
	// emptyThink matches an empty think block as a template writes it:
	// newlines as escapes inside a string literal, or as they are.
	emptyThink = regexp.MustCompile(`<think>(?:\\n|\s)*</think>`)
)

// ThinkBlockOf reads a chat template (its source text, as
// tokenizer_config.json's chat_template holds it) far enough to say how the
// assistant turn opens when the model answers without reasoning: it looks
// at the template's last "if add_generation_prompt" block and returns
// [ThinkEmpty] when that block can write an empty think block (Qwen3,
// Qwen3.5: with enable_thinking false, or by default), [ThinkNone] when it
// writes no think tag at all (Qwen2.5, Qwen3 Instruct-2507). A block that
// only ever opens a think block for the model to fill (thinking-only
// models) is refused, as is a template whose turn is not ChatML's
// "<|im_start|>assistant".
func ThinkBlockOf(tmpl string) (string, error) {
	locs := generationPrompt.FindAllStringIndex(tmpl, -1)
	if locs == nil {
		return "", errors.New("the chat template has no add_generation_prompt block: how the assistant turn opens is unknown")
	}
	gen := tmpl[locs[len(locs)-1][0]:]
	if !strings.Contains(gen, "<|im_start|>assistant") {
		return "", errors.New("the chat template's assistant turn does not open with <|im_start|>assistant: jevfmt/1 is ChatML")
	}
	if emptyThink.MatchString(gen) {
		return ThinkEmpty, nil
	}
	if strings.Contains(gen, "<think>") {
		return "", errors.New("the chat template opens the assistant turn with a <think> block for the model to reason in and never with an empty one: a thinking-only model does not answer with its first token")
	}
	return ThinkNone, nil
}
