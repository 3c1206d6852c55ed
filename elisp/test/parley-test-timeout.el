;;; parley-test-timeout.el --- A time limit for each ERT test  -*- lexical-binding: t; -*-

;;; Commentary:

;; run-tests.el gives every test a time limit (issue 44: no test can
;; hang).  A test still running at its limit fails, with the stack it
;; was waiting in, and the run goes on to the next test; without it a
;; hung test stalls the whole batch until scripts/test-emacs's outer
;; `timeout' kills Emacs, which names no test.
;;
;; The limit fires from a timer, so it ends a test that waits (for a
;; process, an answer, a timer: `accept-process-output', `sleep-for'),
;; which is how these tests hang; a loop that never waits is ended by
;; the outer `timeout' alone.

;;; Code:

(require 'ert)
(require 'seq)

(defun parley-test-timeout-seconds ()
  "Seconds each test may take: PARLEY_ERT_TIMEOUT, else 120.
The slowest test takes about 12 s (docs/testing.md)."
  (let ((given (getenv "PARLEY_ERT_TIMEOUT")))
    (if (and given (> (string-to-number given) 0)) (string-to-number given) 120)))

(defun parley-test-timeout--stack ()
  "The functions a test was in when its timer fired, innermost first.
Only named functions, from where it waited up to its body: the
timer's own frames and ERT's are left out."
  (let (frames)
    (mapbacktrace (lambda (_evald function _args _flags)
                    (when (and (symbolp function) (fboundp function)
                               (not (special-form-p function)))
                      (push function frames))))
    (setq frames (nreverse frames))
    (let ((timer (memq 'timer-event-handler frames)))
      (when timer (setq frames (cdr timer))))
    (seq-take-while (lambda (f) (not (eq f 'ert--run-test-internal))) frames)))

(defun parley-test-timeout-wrap (test seconds)
  "Make TEST fail when it runs longer than SECONDS, showing where it waited."
  (let ((body (ert-test-body test))
        (name (ert-test-name test)))
    (setf (ert-test-body test)
          (lambda ()
            (let* ((tag (make-symbol "parley-test-timeout"))
                   (stack
                    (catch tag
                      (let ((timer (run-with-timer
                                    seconds nil
                                    (lambda () (throw tag (parley-test-timeout--stack))))))
                        (unwind-protect (progn (funcall body) nil)
                          (cancel-timer timer))))))
              (when stack
                (ert-fail (list (format "%s timed out after %s s" name seconds)
                                :waiting-in stack))))))
    test))

(defun parley-test-timeout-all (&optional seconds)
  "Give every defined ERT test a limit of SECONDS (default: the configured one)."
  (let ((limit (or seconds (parley-test-timeout-seconds))))
    (dolist (test (ert-select-tests t t))
      (parley-test-timeout-wrap test limit))))

(provide 'parley-test-timeout)

;;; parley-test-timeout.el ends here
