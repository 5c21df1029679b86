// The AI SDK's own chat client (AbstractChat + DefaultChatTransport from the `ai` package),
// driven by a small program the Python tests write, against helix-dbos's chat routes.
//
//   node chat_client.mjs '{"api": "http://127.0.0.1:8000/chat", "chatId": "c1", "steps": [...]}'
//
// Steps, in order:
//   {"send": "text"}                      sendMessage({text}) and wait for the chat to settle
//   {"send": "text", "dropAfter": 3}      ... but drop the connection after 3 text deltas (stop())
//   {"approve": true, "reason": "..."}    addToolApprovalResponse for every pending approval
//   {"signal": "name"}                    print "SIGNAL name" and wait for a line on stdin
//   {"reload": true, "api": "..."}        a new chat (same id and messages), resume: true
// The chat answers client tools named in "clientTools" ({"tool": output}) from onToolCall.
// It sends automatically when every tool call has its output or approval, as a page would
// (lastAssistantMessageIsCompleteWith*), and prints the result as one JSON line:
// {"messages", "requests": [{"method", "status", "chunks"}], "status", "error"}.
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";
import readline from "node:readline";

const program = JSON.parse(process.argv[2]);
const requests = [];
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

class State {
  constructor(messages = []) {
    this.messages = messages;
    this.status = "ready";
    this.error = undefined;
  }
  pushMessage(message) { this.messages = [...this.messages, message]; }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(index, message) {
    this.messages = this.messages.map((m, i) => (i === index ? message : m));
  }
  snapshot(value) { return structuredClone(value); }
}

let dropAfter = null; // {count, chat}: stop() after that many text deltas of the next response

async function record(response, entry) {
  const decoder = new TextDecoder();
  let buffer = "";
  let deltas = 0;
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!frame.startsWith("data: ")) continue;
      const data = frame.slice(6);
      const chunk = data === "[DONE]" ? "[DONE]" : JSON.parse(data);
      entry.chunks.push(chunk);
      if (chunk.type === "text-delta" && dropAfter && ++deltas >= dropAfter.count) {
        const { chat } = dropAfter;
        dropAfter = null;
        chat.stop();
      }
    }
  }
}

async function recordingFetch(url, init) {
  const response = await fetch(url, init);
  const entry = { method: init?.method ?? "GET", status: response.status, chunks: [] };
  requests.push(entry);
  if (!response.body) return response;
  const [mine, theirs] = response.body.tee();
  record({ body: theirs }, entry).catch(() => {});
  return new Response(mine, { status: response.status, headers: response.headers });
}

function makeChat(api, messages) {
  let chat;
  chat = new AbstractChat({
    id: program.chatId,
    state: new State(messages),
    transport: new DefaultChatTransport({ api, fetch: recordingFetch, body: program.agent ? { agent: program.agent } : {} }),
    sendAutomaticallyWhen: (options) =>
      lastAssistantMessageIsCompleteWithToolCalls(options) || lastAssistantMessageIsCompleteWithApprovalResponses(options),
    onToolCall: ({ toolCall }) => {
      const outputs = program.clientTools ?? {};
      if (toolCall.toolName in outputs) {
        chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: outputs[toolCall.toolName] });
      }
    },
    onError: () => {},
  });
  return chat;
}

async function settle(chat) {
  let quiet = 0;
  while (quiet < 15) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const busy = chat.status === "submitted" || chat.status === "streaming" || chat.activeResponse != null
      || chat.pendingAutomaticDecisions.length > 0;
    quiet = busy ? 0 : quiet + 1;
  }
}

let chat = makeChat(program.api, []);
for (const step of program.steps) {
  if (step.send !== undefined) {
    if (step.dropAfter) dropAfter = { count: step.dropAfter, chat };
    await chat.sendMessage({ text: step.send });
    await settle(chat);
  } else if (step.approve !== undefined) {
    const parts = chat.messages.at(-1).parts.filter((p) => p.state === "approval-requested");
    for (const part of parts) {
      await chat.addToolApprovalResponse({ id: part.approval.id, approved: step.approve, reason: step.reason });
    }
    await settle(chat);
  } else if (step.signal !== undefined) {
    console.log(`SIGNAL ${step.signal}`);
    await lines.next();
  } else if (step.reload) {
    const messages = structuredClone(chat.messages);
    await chat.stop();
    chat = makeChat(step.api ?? program.api, messages);
    await chat.resumeStream();
    await settle(chat);
  }
}
console.log(JSON.stringify({
  messages: chat.messages, requests, status: chat.status, error: chat.error ? String(chat.error.message ?? chat.error) : null,
}));
process.exit(0);
