// Package hub downloads checkpoints from the Hugging Face Hub the way the
// Hub's own clients do, keeping only what StartLux runs.
//
// A pull has two steps. [Client.Resolve] reads the revision's file list
// (GET {endpoint}/api/models/{repo}/revision/{rev}?blobs=true: names, sizes,
// LFS sha256 and git blob ids), pins the revision to its commit, fetches the
// small files that decide whether the checkpoint can run (config.json, parsed
// by [model.ParseConfig]; decision_config.json; the safetensors index) and
// returns a [Plan]: the files to fetch, or an error before any weights move
// (no safetensors, another architecture, a broken decision config).
// [Client.Download] fetches the plan's files from
// {endpoint}/{repo}/resolve/{commit}/{file} into a hidden sibling of the
// target directory, resumes any .part file left by an interrupted pull with
// a Range request, checks each file's size and hash (sha256 for LFS files,
// the git blob id for the rest), writes the provenance record [Source] and
// renames the sibling into place: the target directory appears only when
// complete.
//
// Around a download, the package keeps the models folder for both pull
// commands (startlux pull and the daemon's load {"pull"}): [CheckName]
// says which names a model may take, [Client.Install] decides between
// downloading, "already pulled" and an [*ExistsError] for what is in the
// way, and [Remove] deletes a model and its interrupted pull and reports
// what it removed.
//
// Redirects are followed by hand. The token goes only to the endpoint's own
// origin; a redirect to another host (the Hub's LFS/xet storage, a CDN) is
// followed without it, as huggingface_hub does, and a redirect from https to
// http is refused. The metadata headers (X-Repo-Commit, X-Linked-Etag,
// X-Linked-Size, ETag) are read from the endpoint's responses only, never
// from the storage host's. Errors never contain the token.
package hub
