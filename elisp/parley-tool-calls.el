;;; parley-tool-calls.el --- Tool calls and edits in a Parley transcript  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; A tool call is a foldable section of the transcript: its header
;; (the title the server gives it, its status, the files it touched as
;; buttons) and its body (the input, as code or JSON, and the content
;; or output).  An edit is one line, "Edited app.py +3 −1", whose body
;; is its diff.  `parley--tool-update' shows a `tool_call' or a
;; `tool_call_update'; parley-question.el shows a question's tool with
;; the same pieces.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'parley-diff)
(require 'parley-display)
(require 'parley-markdown)
(require 'parley-terminals)
(require 'parley-transcript)
(require 'parley-wire)

;;;; Customization

(defcustom parley-tool-display-limit 4000
  "Maximum characters of a tool's input or output shown in the buffer."
  :type 'integer
  :group 'parley)

(defcustom parley-image-max-width 600
  "Widest an image a tool call displayed is shown, in pixels.
A plot an evaluation drew, for instance; a larger one is scaled down."
  :type 'integer
  :group 'parley)

;;;; Faces

(defface parley-tool-header '((t :inherit font-lock-constant-face))
  "Face for the header line of a tool call."
  :group 'parley)

(defface parley-tool-body '((t :inherit shadow))
  "Face for a tool call's input and output."
  :group 'parley)

(defface parley-status-pending '((t :inherit shadow))
  "Face for the status of a tool call not yet started."
  :group 'parley)

(defface parley-status-running '((t :inherit warning))
  "Face for the status of a running tool call."
  :group 'parley)

(defface parley-status-done '((t :inherit success))
  "Face for the status of a finished tool call."
  :group 'parley)

(defface parley-status-failed '((t :inherit error))
  "Face for the status of a failed tool call."
  :group 'parley)

(defface parley-tool-superseded '((t :inherit shadow))
  "Face for a tool call the model did not make after all (superseded)."
  :group 'parley)

(defface parley-location '((t :inherit link))
  "Face for a file location of a tool call, a button that opens it."
  :group 'parley)

;;;; JSON as text

(defvar json-false)
(defvar json-null)
(declare-function json-encode "json" (object))

(defun parley--json-encode (value)
  "Encode VALUE (a plist or vector from jsonrpc.el) as a JSON string.
Emacs 28 has `json-serialize' only when built with libjansson;
otherwise json.el does it, as it does for jsonrpc.el."
  (if (fboundp 'json-serialize)
      (json-serialize value :null-object nil :false-object :json-false)
    (require 'json)
    (let ((json-false :json-false)
          (json-null nil))
      (json-encode value))))

(defun parley--json-brief (value &optional limit)
  "Return VALUE (as jsonrpc.el parsed it) as compact text, at most LIMIT chars."
  (let ((text (if (stringp value)
                  value
                (condition-case nil
                    (parley--json-encode value)
                  (error (prin1-to-string value))))))
    (if (and limit (> (length text) limit))
        (concat (substring text 0 limit) "…")
      text)))

;;;; Tool calls

(defun parley--status-label (status)
  "Return the label and face of the tool STATUS as a cons."
  (pcase status
    ("in_progress" '("running" . parley-status-running))
    ("completed" '("done" . parley-status-done))
    ("failed" '("failed" . parley-status-failed))
    (_ '("pending" . parley-status-pending))))

(defun parley--indent (text)
  "Return TEXT with each line indented by four spaces."
  (replace-regexp-in-string "^" "    " text))

(defun parley--limit (text)
  "Return TEXT cut to `parley-tool-display-limit' characters."
  (if (<= (length text) parley-tool-display-limit)
      text
    (format "%s\n… [%d more characters]"
            (substring text 0 parley-tool-display-limit)
            (- (length text) parley-tool-display-limit))))

(defun parley--input-string (title input &optional full)
  "Return the INPUT of the tool call TITLE as body lines, indented.
Code (docs/display.md, `parley-display-tool-input') is fontified in
its language; any other input is indented JSON.  It is cut to
`parley-tool-display-limit' characters unless FULL."
  (pcase-let ((`(,language . ,text) (parley-display-tool-input title input))
              (cut (lambda (shown)
                     ;; Controls and bidi characters shown: the code is what it reads.
                     (parley-display-escape-controls (if full shown (parley--limit shown))))))
    (if language
        (parley--props (parley--code-block (funcall cut text)
                                           (parley-markdown-mode-for language)))
      (parley--props (concat (parley--indent (funcall cut text)) "\n")
                     'face 'parley-tool-body))))

(defun parley--tool-body (block)
  "Return the body of the tool BLOCK's section: input, content and output.
Each part starts with a newline and does not end with one."
  (let* ((input (parley--block-input block))
         (final (or (parley--block-superseded block)
                    (member (parley--block-status block) '("completed" "failed"))))
         (content (mapconcat (lambda (item) (parley--content-item-string item input nil t))
                             (parley--block-content block) ""))
         (raw (parley--block-raw-output block))
         (part (lambda (label text)
                 (concat (parley--props (format "\n  %s:\n" label) 'face 'parley-tool-body)
                         (string-trim-right text "\n")))))
    (concat
     (if input
         (funcall part "input" (parley--input-string (parley--block-title block) input))
       "")
     (cond ((not (string-empty-p content))
            ;; Before the call ends, its content is what it is about
            ;; (the code, the diff); after, its result.
            (funcall part (if final "output" "content") content))
           ((and raw (not (parley--block-superseded block)))
            (funcall part "output" (parley--props (parley--indent (parley-display-escape-controls
                                                                   (parley--limit (parley--json-brief raw))))
                                                  'face 'parley-tool-body)))
           (t "")))))

;;;; File locations

(defvar parley-location-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "RET") #'parley-open-location)
    (define-key map [mouse-1] #'parley-open-location-click)
    (define-key map [mouse-2] #'parley-open-location-click)
    map)
  "Keymap on the file locations of a tool call.")

(defun parley--location-string (location)
  "Return the clickable text of the tool call LOCATION (:path, :line)."
  (let* ((path (plist-get location :path))
         (line (plist-get location :line))
         ;; A chat buffer's directory is its workspace root.
         (root (file-name-as-directory (expand-file-name default-directory)))
         (shown (if (and (file-name-absolute-p path) (string-prefix-p root path))
                    (substring path (length root))
                  path))
         (label (parley-display-escape-controls
                 (if (numberp line) (format "%s:%d" shown line) shown) t)))
    (propertize label
                'parley-location location 'face 'parley-location
                'mouse-face 'highlight 'follow-link t 'keymap parley-location-map
                'help-echo (format "RET or mouse-1: open %s" label))))

(defun parley--locations-line (locations)
  "Return the line of the file LOCATIONS (ACP's), or the empty string.
It starts with a newline and does not end with one."
  (let ((locations (cl-remove-if-not (lambda (l) (stringp (plist-get l :path)))
                                     (append locations nil))))
    (if locations
        (concat "\n    " (mapconcat #'parley--location-string locations "  "))
      "")))

(defun parley--locations-string (block)
  "Return the line of the tool BLOCK's file locations, or the empty string."
  (parley--locations-line (parley--block-locations block)))

(defun parley--terminals-string (block)
  "Return the line of links to the tool BLOCK's terminals, or the empty string.
A command the server runs in an Emacs terminal has the content
`{type: \"terminal\", terminalId}'."
  (let ((ids (delete-dups
              (cl-loop for item in (parley--block-content block)
                       when (and (equal (plist-get item :type) "terminal")
                                 (stringp (plist-get item :terminalId)))
                       collect (plist-get item :terminalId)))))
    (if ids
        (concat "\n    " (mapconcat #'parley-terminals-link ids "  "))
      "")))

(defun parley-open-location (&optional pos)
  "Open the file of the tool call location at POS (point), at its line."
  (interactive)
  (let ((location (get-text-property (or pos (point)) 'parley-location)))
    (unless location (user-error "No file location here"))
    (let ((file (expand-file-name (plist-get location :path)))
          (line (plist-get location :line)))
      (pop-to-buffer (find-file-noselect file))
      (when (numberp line)
        (goto-char (point-min))
        (forward-line (1- line))))))

(defun parley-open-location-click (event)
  "Open the file of the tool call location clicked on in EVENT."
  (interactive "e")
  (let ((position (event-end event)))
    (with-current-buffer (window-buffer (posn-window position))
      (parley-open-location (posn-point position)))))

(defun parley--edit-string (block diffs)
  "Return the transcript text of the edit BLOCK, whose DIFFS are ACP diffs.
One line, such as \"Edited app.py +3 −1\", whose body is the diff
\(and the error, when the edit failed)."
  (let* ((expanded (parley--block-expanded block))
         (status (parley--block-status block))
         (done (equal status "completed"))
         (root parley--cwd)
         (header
          (lambda (text &optional face)
            (parley--props text 'parley-header block 'face (or face 'parley-tool-header))))
         (raw (parley--block-raw-output block))
         (output (and (not done) raw
                      ;; The error of the default rawOutput, {content, isError}.
                      (if (and (consp raw) (stringp (plist-get raw :content)))
                          (plist-get raw :content)
                        (parley--json-brief raw))))
         (body (concat
                (mapconcat (lambda (item) (parley-diff-item-string item root "    "))
                           diffs "")
                (if output
                    (parley--props (concat "  output:\n"
                                           (parley--indent (parley--limit (string-trim-right output)))
                                           "\n")
                                   'face 'parley-tool-body)
                  ""))))
    (concat
     (funcall header (concat (string (if expanded parley--arrow-open parley--arrow-closed))
                             (if done " Edited" " Edit")))
     (mapconcat
      (lambda (item)
        (let ((stats (parley-diff-stats (plist-get item :oldText) (plist-get item :newText))))
          (concat (funcall header (concat " " (parley-diff-path item root) " "))
                  (funcall header (format "+%d" (car stats)) 'diff-added)
                  (funcall header " ")
                  (funcall header (format "−%d" (cdr stats)) 'diff-removed))))
      diffs (funcall header ","))
     (if done
         ""
       (let ((label (if (parley--block-superseded block)
                        '("superseded" . parley-tool-superseded)
                      (parley--status-label status))))
         (funcall header (concat " [" (car label) "]") (cdr label))))
     ;; The body starts on the header's newline, as a thought's does,
     ;; so that folded, the header is one line.
     (parley--props (concat "\n" (string-remove-suffix "\n" body))
                    'parley-body block
                    'invisible (unless expanded 'parley-hidden))
     (parley--props (string ?\n)))))

(defun parley--block-diffs (block)
  "Return the ACP diffs of the tool BLOCK: an edit's."
  (and (eq (parley--block-kind block) 'tool)
       (parley-diff-items (parley--block-content block))))

(defun parley--tool-string (block)
  "Return the transcript text of the tool BLOCK: a header and a body."
  (let ((diffs (parley--block-diffs block)))
    (if diffs
        (parley--edit-string block diffs)
      (parley--call-string block))))

(defun parley--result-summary (block)
  "Return the summary of the finished tool BLOCK's result, or nil.
The rule of docs/display.md, `parley-display-tool-summary'."
  (let ((status (parley--block-status block)))
    (when (member status '("completed" "failed"))
      (let ((text (mapconcat (lambda (item)
                               (let ((text (plist-get (plist-get item :content) :text)))
                                 (if (stringp text) (concat text "\n") "")))
                             (parley--block-content block) "")))
        (when (string-empty-p (string-trim text))
          (let ((raw (parley--block-raw-output block)))
            (setq text (cond ((stringp raw) raw)
                             ((and (consp raw) (stringp (plist-get raw :content)))
                              (plist-get raw :content))
                             (raw (parley--json-brief raw))
                             (t "")))))
        (parley-display-tool-summary text)))))

(defun parley--call-string (block)
  "Return the transcript text of the tool BLOCK that is not an edit.
The header is the title, the status and the file locations; the body,
folded unless the block is expanded, the input, content and output."
  (let* ((expanded (parley--block-expanded block))
         (superseded (parley--block-superseded block))
         (status (if superseded
                     '("superseded" . parley-tool-superseded)
                   (parley--status-label (parley--block-status block))))
         (title (car (split-string (or (parley--block-title block) "tool") "\n")))
         (title (truncate-string-to-width (parley-display-escape-controls title)
                                          100 nil nil "…"))
         (body (parley--tool-body block)))
    (concat
     (parley--props (concat (string (if expanded parley--arrow-open parley--arrow-closed))
                            " " title " ")
                    'parley-header block
                    'face (if superseded 'parley-tool-superseded 'parley-tool-header))
     (apply #'parley--props (concat "[" (car status) "]")
            'parley-header block 'face (cdr status)
            (let ((summary (parley--result-summary block)))
              (and summary (list 'help-echo summary))))
     (parley--props (parley--locations-string block) 'parley-header block)
     (parley--props (parley--terminals-string block) 'parley-header block)
     (if (string-empty-p body)
         ""
       (parley--props body 'parley-body block
                      'invisible (unless expanded 'parley-hidden)))
     (parley--props (string ?\n)))))

(defun parley--replayed-edit-diff (block)
  "Give the finished edit BLOCK the diff of its arguments, if it has no diff.
A session replayed from the store sends an edit as its call (its
arguments, `path', `old_text' and `new_text', and where it changed
the file) and its result's text, without the diff it showed live:
made from them, the edit is shown as it was live, one `Edited' line,
and \\[parley-show-diff] shows it."
  (let ((input (parley--block-input block))
        (content (parley--block-content block)))
    (when (and (equal (parley--block-status block) "completed")
               (consp input) (keywordp (car input))
               (stringp (plist-get input :old_text))
               (stringp (plist-get input :new_text))
               (null (parley-diff-items content)))
      (let* ((location (car (parley--block-locations block)))
             (path (or (plist-get location :path) (plist-get input :path))))
        (when (stringp path)
          (setf (parley--block-content block)
                (cons (parley-diff-of-edit path (plist-get input :old_text)
                                           (plist-get input :new_text)
                                           (plist-get location :line))
                      content)))))))

(defun parley--tool-update (update)
  "Show the `tool_call' or `tool_call_update' UPDATE.
A field it has replaces the one shown; the others stay."
  (let* ((id (plist-get update :toolCallId))
         (block (gethash (cons 'tool id) parley--blocks))
         (new (null block)))
    (when new
      (parley--ensure-role 'agent)
      (parley--fold-thoughts)
      (setq block (parley--new-block 'tool id :status "pending")))
    (when (plist-member update :title)
      (setf (parley--block-title block) (plist-get update :title)))
    (when (plist-get update :status)
      (setf (parley--block-status block) (plist-get update :status)))
    (when (plist-member update :rawInput)
      (setf (parley--block-input block) (plist-get update :rawInput)))
    (when (plist-member update :content)
      (setf (parley--block-content block) (append (plist-get update :content) nil)))
    (when (plist-member update :locations)
      (setf (parley--block-locations block) (append (plist-get update :locations) nil)))
    (when (plist-member update :rawOutput)
      (setf (parley--block-raw-output block) (plist-get update :rawOutput)))
    (parley--replayed-edit-diff block)
    ;; Superseded: the model did not make this call after all.
    (when (eq (parley-wire-meta update :superseded) t)
      (setf (parley--block-superseded block) t))
    (if new
        (parley--append block (parley--tool-string block))
      (parley--replace block (parley--tool-string block)))
    (when (eq parley--tail block)
      (setq parley--tail nil))))

;;;; Tool call content: code, text and diffs

(defun parley--code-mode (title)
  "Return the major mode that fontifies the code of the tool TITLE, or nil."
  (let ((case-fold-search t))
    (cond ((string-match-p "lisp" title) #'emacs-lisp-mode)
          ((string-match-p "python" title) #'python-mode))))

(defconst parley--fontify-limit 50000
  "Longest code a question fontifies; longer code, shown plain, cannot stall Emacs.")

(defun parley--code-block (code mode)
  "Return CODE indented as a block, fontified by MODE when non-nil."
  (let ((code (copy-sequence (string-trim-right code "\n+"))))
    (when (and mode (<= (length code) parley--fontify-limit))
      (condition-case nil
          (pcase-dolist (`(,from ,to ,face) (parley-markdown-face-runs code mode))
            (put-text-property from to 'face face code))
        (error nil)))                   ; plain text is still the code
    (concat (parley--indent code) "\n")))

(defun parley--unfenced (text)
  "Return TEXT without the Markdown fence around it, when it is one fenced block.
A command's content is its command line in a fence (```sh)."
  (let ((text (string-trim text)))
    (if (and (string-prefix-p "```" text) (string-suffix-p "\n```" text)
             (string-search "\n" text))
        (substring text (1+ (string-search "\n" text)) (- (length text) 4))
      text)))

(defun parley--in-input-p (text input)
  "Return non-nil when TEXT is the value of a field of the tool INPUT.
TEXT may be that value in a Markdown fence."
  (and (consp input) (keywordp (car input))
       (let ((text (string-trim (parley--unfenced text))))
         (cl-loop for (_key value) on input by #'cddr
                  thereis (and (stringp value) (equal (string-trim value) text))))))

(defun parley--content-item-string (item input &optional mode limit)
  "Return the ACP tool call content ITEM as transcript text, in lines.
Text (the code of an evaluation, a tool's output) is a block,
fontified by MODE when non-nil; text already shown as a field of the
tool INPUT is not repeated.  A diff is shown in `diff-mode' faces.
With LIMIT, either is cut to `parley-tool-display-limit' characters."
  (let ((cut (if limit #'parley--limit #'identity)))
    (pcase (plist-get item :type)
      ((and "content" (guard (equal (plist-get (plist-get item :content) :type) "image")))
       (parley--image-string (plist-get item :content)))
      ("content"
       (let* ((text (plist-get (plist-get item :content) :text))
              (shown (and (stringp text) (parley-display-escape-controls (funcall cut text)))))
         (cond ((or (not (stringp text)) (string-empty-p (string-trim text))
                    (parley--in-input-p text input))
                "")
               (mode (parley--props (parley--code-block shown mode)))
               (t (parley--props (parley--code-block shown nil)
                                 'face 'parley-tool-body)))))
      ("diff"
       (funcall cut (parley--props (parley-diff-item-string item parley--cwd "    "))))
      (_ ""))))

;; The image types ACP's image blocks carry (docs/protocol.md, "Images").
(defconst parley--image-types
  '(("image/png" . png) ("image/jpeg" . jpeg) ("image/gif" . gif) ("image/webp" . webp))
  "Emacs's image type of each MIME type an image block may have.")

(defun parley--image-string (image)
  "Return the transcript text of the ACP IMAGE block a tool call displayed.
Where the frame can show images of its type, the image itself (no
wider than `parley-image-max-width'), on a line of its own; elsewhere
\(a terminal, Emacs without image support) a line saying what it is."
  (let* ((mime (plist-get image :mimeType))
         (type (cdr (assoc mime parley--image-types)))
         (data (ignore-errors (base64-decode-string (or (plist-get image :data) ""))))
         (caption (format "[An image: %s, %s]" (or mime "of no type")
                          (if data (file-size-human-readable-iec (length data)) "unreadable")))
         (shown (and data type (display-images-p) (image-type-available-p type)
                     (ignore-errors
                       (create-image data type t :max-width parley-image-max-width)))))
    (concat "    "
            (if shown
                (propertize caption 'display shown)
              (propertize caption 'face 'parley-tool-body))
            "\n")))

(provide 'parley-tool-calls)
;;; parley-tool-calls.el ends here
