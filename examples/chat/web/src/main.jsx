// The example's chat page: the AI SDK's useChat on helix-dbos's chat routes.
// The chat id (the session id) lives in the URL's hash, so a reload resumes the same chat;
// the messages are kept in localStorage, and resume: true replays the answer in progress.
import { useChat } from "@ai-sdk/react";
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";
import { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";

const chatId = location.hash.slice(1) || (location.hash = crypto.randomUUID()).slice(1);
const saved = JSON.parse(localStorage.getItem(`chat:${chatId}`) ?? "[]");

function ToolPart({ part, onAnswer }) {
  return (
    <div className="tool">
      <b>{part.type.slice(5)}</b> <code>{JSON.stringify(part.input)}</code> <i className="tool-state">{part.state}</i>
      {part.state === "approval-requested" && (
        <span>
          {" "}<button className="approve" onClick={() => onAnswer(part.approval.id, true)}>Approve</button>
          {" "}<button className="deny" onClick={() => onAnswer(part.approval.id, false)}>Deny</button>
        </span>
      )}
      {part.state === "output-available" && <div><code>{JSON.stringify(part.output)}</code></div>}
    </div>
  );
}

function Chat() {
  const [input, setInput] = useState("");
  const { messages, sendMessage, addToolApprovalResponse, status, error } = useChat({
    id: chatId,
    messages: saved,
    resume: true,
    transport: new DefaultChatTransport({ api: "/agents/chat" }),
    sendAutomaticallyWhen: (options) =>
      lastAssistantMessageIsCompleteWithToolCalls(options) || lastAssistantMessageIsCompleteWithApprovalResponses(options),
  });
  useEffect(() => localStorage.setItem(`chat:${chatId}`, JSON.stringify(messages)), [messages]);
  const answer = (id, approved) => addToolApprovalResponse({ id, approved, reason: approved ? undefined : "declined" });
  return (
    <div>
      {messages.map((message) => (
        <div key={message.id} className={`message ${message.role}`}>
          {message.parts.map((part, i) => {
            if (part.type === "text") return <p key={i} className="text">{part.text}</p>;
            if (part.type.startsWith("tool-")) return <ToolPart key={i} part={part} onAnswer={answer} />;
            if (part.type === "data-state") return <div key={i} className="state">state: {JSON.stringify(part.data)}</div>;
            return null;
          })}
        </div>
      ))}
      {error && <p className="error">{error.message}</p>}
      <form onSubmit={(e) => { e.preventDefault(); if (input) { sendMessage({ text: input }); setInput(""); } }}>
        <input id="input" value={input} onChange={(e) => setInput(e.target.value)} placeholder="Ask support..." />
        <button id="send" disabled={status === "streaming" || status === "submitted"}>Send</button>
      </form>
    </div>
  );
}

createRoot(document.getElementById("root")).render(<Chat />);
