;;; parley-papercuts-test.el --- Daily use II in the chat buffer (issue 42, unit)  -*- lexical-binding: t; -*-

;;; Commentary:

;; The papercuts of issue 42 a chat buffer shows without a server:
;; `/mode' and `/model' complete their argument in the prompt from the
;; session's config options.  (The queue's label is checked with the
;; queue in parley-daily-test.el; resuming with `M-x parley' against
;; the real server in parley-integration-daily-test.el.)

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley)
(require 'parley-test)

(defconst parley-papercuts-test--options
  [(:id "mode" :name "Mode" :category "mode" :type "select" :currentValue "ask"
        :options [(:value "ask" :name "Ask" :description "Every edit asks")
                  (:value "accept_edits" :name "Accept edits" :description "Edits apply")
                  (:value "plan" :name "Plan" :description "Read only")])
   (:id "model" :name "Model" :category "model" :type "select"
        :currentValue "openai:gpt-4.1-mini"
        :options [(:value "openai:gpt-4.1-mini" :name "openai:gpt-4.1-mini")
                  (:value "anthropic:claude-sonnet-4-5" :name "anthropic:claude-sonnet-4-5")])]
  "A session's config options as the server sends them (agent/config_options.py).")

(defconst parley-papercuts-test--commands
  '((:name "model" :description "Switch the model" :input (:hint "provider:model"))
    (:name "mode" :description "Switch the mode" :input (:hint "ask|accept_edits|plan"))
    (:name "cost" :description "What this session spent"))
  "The session's slash commands (`available_commands_update').")

(ert-deftest parley-papercuts-mode-and-model-complete-their-argument ()
  ;; TAB after `/mode pl' completes the mode, after `/model anth' the
  ;; model: the values of the config option the command is named after.
  (parley-test--with-chat
    (let ((chat (current-buffer)))
      (parley--set-config-options parley-papercuts-test--options)
      (setq parley--commands parley-papercuts-test--commands)
      (pcase-dolist (`(,typed ,completed)
                     '(("/ m o d e SPC p l TAB" "/mode plan")
                       ("/ m o d e SPC a c TAB" "/mode accept_edits")
                       ("/ m o d e l SPC a n t h TAB" "/model anthropic:claude-sonnet-4-5")
                       ;; The command's name still completes.
                       ("/ c o TAB" "/cost")))
        (parley--set-input "")
        (should-not (parley-test--type chat typed (with-current-buffer chat (point-max))))
        (should (equal (parley--current-input) completed)))
      ;; A command named after no config option: TAB completes nothing.
      (parley--set-input "")
      (should-not (parley-test--type chat "/ c o s t SPC x TAB" (point-max)))
      (should (equal (string-trim (parley--current-input)) "/cost x"))
      ;; The annotations are the server's names and descriptions.
      (parley--set-input "/mode ")
      (goto-char (point-max))
      (let* ((capf (parley--command-completion))
             (annotate (plist-get (nthcdr 3 capf) :annotation-function)))
        (should (equal (all-completions "" (nth 2 capf)) '("ask" "accept_edits" "plan")))
        (should (equal (funcall annotate "plan") "  Plan  Read only")))
      (parley--set-input "/model ")
      (goto-char (point-max))
      (let* ((capf (parley--command-completion))
             (annotate (plist-get (nthcdr 3 capf) :annotation-function)))
        (should (equal (funcall annotate "openai:gpt-4.1-mini") ""))))))

(provide 'parley-papercuts-test)
;;; parley-papercuts-test.el ends here
