export const webhookHandlers = {};
